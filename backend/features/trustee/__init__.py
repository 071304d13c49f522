"""Trustee: receipts (Belege), booking lines (Positionen), chart of accounts and VAT codes."""
