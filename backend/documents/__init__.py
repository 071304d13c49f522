"""Documents and charts made from data: Markdown to PDF and DOCX, tables to PNG charts.

Framework-free and independent of the action library:

- `blocks.parse_markdown` turns Markdown into a small block model (headings, paragraphs with
  bold/italic/code/link runs, nested lists, tables, code blocks, quotes, rules);
- `pdf_render.render_pdf` and `docx_render.render_docx` write that model with fpdf2 and
  python-docx;
- `charts.render_chart` draws tabular data as a PNG with matplotlib's Agg backend.

Bad input raises `blocks.DocumentError` with a message that names the field at fault. The
heavy libraries (fpdf2, python-docx, matplotlib) are imported only by the module that needs
them, so importing this package stays cheap.
"""
