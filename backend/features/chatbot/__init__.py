"""The Chatbot feature (issue 22): a chat over a database, configured per instance."""
