"""Built-in executors (hookspecs.md, ``kernelpro_register_executors``): ``local`` and ``ray``."""
