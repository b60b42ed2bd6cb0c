//! Schema and index changes: `ALTER TABLE`, `CREATE INDEX` / `DROP INDEX`.

pub(crate) mod alter;
pub(crate) mod cloud_ddl;
pub(crate) mod index;
pub(crate) mod index_memory;
pub(crate) mod index_options;
