"""The file store of each feature instance: folders, files, extracted text and full-text search.

Everything goes through :mod:`backend.files.service`; :mod:`backend.files.extract` turns bytes
into searchable text.
"""
