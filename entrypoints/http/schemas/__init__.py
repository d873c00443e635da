"""msgspec schemas: one Struct per shape (X, XCreate, XUpdate with UNSET fields for PATCH)."""
