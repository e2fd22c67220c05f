//! HTTP session records in Redis, through rmcp's session store.
