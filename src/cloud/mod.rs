//! LanceDB Cloud and Enterprise tables (`db://DATABASE/TABLE`): the service
//! vends no storage credentials, only a REST data plane, so these tables are
//! read through requests rather than by opening Lance files.
//!
//! * [`address`]: `db://` locations and the service's table ids;
//! * [`options`]: `OPTIONS (...)` keys, the `LANCEDB_*` variables, and
//!   [`CloudTable`], the plain data nodes carry;
//! * [`client`]: the requests and their errors;
//! * [`ddl`]: index, column and tag changes ([`CloudDdl`]);
//! * [`listing`]: versions, tags and indices, as the service lists them;
//! * [`dialect`]: where LanceDB's service spells requests and answers
//!   otherwise than Lance's namespace model;
//! * [`retry`]: which failures are retried, by request class;
//! * [`schema`]: table schemas in either JSON form the services write;
//! * [`sql`]: which filters travel, as Lance SQL text;
//! * [`ipc`]: Arrow IPC bodies.

pub(crate) mod address;
pub(crate) mod client;
pub(crate) mod ddl;
pub(crate) mod dialect;
pub(crate) mod ipc;
pub(crate) mod listing;
pub(crate) mod options;
pub(crate) mod retry;
pub(crate) mod schema;
pub(crate) mod sql;

pub(crate) use address::CloudAddress;
pub(crate) use client::{CloudClient, MergeRequest, Merged, Page};
pub(crate) use ddl::CloudDdl;
pub(crate) use options::{CloudOptions, Service};
pub(crate) use options::{CloudTable, RequestPolicy};
pub(crate) use sql::{assignment_to_lance_sql, to_lance_sql};
