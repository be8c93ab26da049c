"""The review workbench's domain over the store: what the team's labels add up to (``labels``)."""
