"""Request and response models of the HTTP API (msgspec Structs).

The handlers decode with them and the OpenAPI document is generated from them.
"""
