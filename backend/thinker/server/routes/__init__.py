"""One router per resource; handlers are thin and named as OpenAPI operation ids."""
