//! `db://DATABASE/[NAMESPACE/…/]TABLE`: where a LanceDB Cloud or Enterprise
//! table lives.

use crate::location::InvalidLocation;

/// The scheme of LanceDB Cloud and Enterprise locations.
pub(crate) const CLOUD_SCHEME: &str = "db://";

/// The delimiter that joins namespace parts and the table name into the
/// table id the service's paths use.
pub(crate) const ID_DELIMITER: &str = "$";

/// A table of a LanceDB Cloud or Enterprise database.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CloudAddress {
    /// The database (the host's first label for LanceDB Cloud).
    pub database: String,
    /// Namespace parts, then the table name.
    pub id: Vec<String>,
}

impl CloudAddress {
    /// True when `uri` names a LanceDB Cloud or Enterprise table.
    pub(crate) fn is_cloud(uri: &str) -> bool {
        let uri = uri.trim();
        uri.len() >= CLOUD_SCHEME.len()
            && uri[..CLOUD_SCHEME.len()].eq_ignore_ascii_case(CLOUD_SCHEME)
    }

    /// Parses `db://DATABASE/[NAMESPACE/…/]TABLE`.
    pub(crate) fn parse(uri: &str) -> Result<Self, InvalidLocation> {
        let invalid = |reason: &str| InvalidLocation {
            location: uri.to_string(),
            reason: reason.to_string(),
        };
        if !Self::is_cloud(uri) {
            return Err(invalid("a LanceDB location starts with db://"));
        }
        let rest = uri.trim()[CLOUD_SCHEME.len()..].trim_end_matches('/');
        let mut parts = rest.split('/');
        let database = parts.next().unwrap_or_default().to_string();
        if database.is_empty() {
            return Err(invalid("no database: expected db://DATABASE/TABLE"));
        }
        let id: Vec<String> = parts.map(str::to_string).collect();
        if id.is_empty() {
            return Err(invalid("no table: expected db://DATABASE/TABLE"));
        }
        if id.iter().any(|p| p.is_empty()) {
            return Err(invalid("empty path segment"));
        }
        if id.iter().any(|p| p.contains(ID_DELIMITER)) || database.contains(ID_DELIMITER) {
            return Err(invalid("'$' is the service's namespace delimiter"));
        }
        Ok(Self { database, id })
    }

    /// The location in its one spelling: `db://DATABASE/NS/TABLE`.
    pub(crate) fn uri(&self) -> String {
        format!("{CLOUD_SCHEME}{}/{}", self.database, self.id.join("/"))
    }

    /// The id the service's paths use: parts joined by `$`.
    pub(crate) fn table_id(&self) -> String {
        self.id.join(ID_DELIMITER)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_into_database_and_id() {
        let a = CloudAddress::parse("db://mydb/t").unwrap();
        assert_eq!(
            (a.database.as_str(), a.table_id()),
            ("mydb", "t".to_string())
        );
        let a = CloudAddress::parse(" DB://mydb/ns/sub/t/ ").unwrap();
        assert_eq!(a.table_id(), "ns$sub$t");
        assert_eq!(a.uri(), "db://mydb/ns/sub/t");
        for bad in [
            "db://",
            "db:///t",
            "db://mydb",
            "db://mydb/",
            "db://mydb//t",
            "db://m/a$b",
            "s3://b/t",
        ] {
            assert!(CloudAddress::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
