"""Configuration as code: campaigns, and the sites, endpoints and vantage points they use, as
one YAML file in a versioned format (docs/configuration-as-code.md).

`documents` reads a file into values that remember their lines and writes the canonical text;
`export` writes what the database holds; `importing` validates a file whole with the pages'
forms and applies it in one transaction.
"""
