"""The words the gate reads, one module per language, each of one shape (like a locale's formats)."""
