"""One module per page of the workbench; each exposes ``ROUTES``."""
