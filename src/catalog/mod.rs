//! Catalogs: Lance namespaces as DataFusion catalogs ([`LanceCatalog`]) and
//! quoted-path tables ([`LanceUrlTableFactory`]).

mod cloud_ddl;
mod ddl;
mod lake;
mod namespace;
mod new_tables;
mod url;

pub(crate) use ddl::{plan_catalog_ddl, run_catalog_plan};
pub use lake::{LanceCatalog, refresh_lance_catalogs, register_lance_catalog};
pub(crate) use lake::{lance_catalog_of, refresh_catalogs_of};
pub use namespace::{NamespaceKind, NamespaceSpec};
pub use url::{LanceUrlTableFactory, enable_lance_url_tables};
