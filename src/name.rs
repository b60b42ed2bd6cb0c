//! Names that become paths or identifiers outside the SQL text: tables and
//! schemas of a Lance catalog (directories of a directory namespace, ids of
//! a REST namespace), catalog names, tags (`_refs/tags/<tag>.json`) and
//! index names. Each is checked before anything is written, so a name can
//! neither escape the place it names nor be written where it cannot be
//! found again.

use crate::error::{Error, Result};

/// What a name names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NameKind {
    Catalog,
    Schema,
    Table,
    Tag,
    Index,
}

impl NameKind {
    fn noun(self) -> &'static str {
        match self {
            Self::Catalog => "catalog",
            Self::Schema => "schema",
            Self::Table => "table",
            Self::Tag => "tag",
            Self::Index => "index",
        }
    }
}

/// The longest name (in bytes) a file system takes as one path segment.
const LONGEST: usize = 255;

/// The rule new names of `kind` follow (see [`check_new`]).
pub(crate) fn rule(kind: NameKind) -> &'static str {
    match kind {
        NameKind::Index => "index names are 1 to 255 bytes without control characters",
        NameKind::Tag => {
            "tag names hold only ASCII letters, digits, '_', '-' and '.', neither start nor end \
             with '.', hold no '..', do not end with '.lock' and are at most 255 bytes (a tag \
             is a file of the table, found again by its name)"
        }
        NameKind::Catalog | NameKind::Schema | NameKind::Table => {
            "catalog, schema and table names hold only ASCII letters, digits, '_', '-' and \
             '.', do not start with '.', hold no '..' and are at most 255 bytes (they become \
             directory names and namespace ids, found again by their names)"
        }
    }
}

/// An error unless `name` may be given to a new `kind`.
pub(crate) fn check_new(kind: NameKind, name: &str) -> Result<()> {
    let ok = match kind {
        NameKind::Index => {
            !name.is_empty() && name.len() <= LONGEST && !name.chars().any(char::is_control)
        }
        NameKind::Tag => plain(name) && !name.ends_with('.') && !name.ends_with(".lock"),
        NameKind::Catalog | NameKind::Schema | NameKind::Table => plain(name),
    };
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "{} name '{}' is not allowed: {}",
            kind.noun(),
            name.escape_debug(),
            rule(kind)
        )))
    }
}

/// ASCII letters, digits, `_`, `-`, `.`; no leading `.`, no `..`; 1 to 255
/// bytes.
fn plain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= LONGEST
        && !name.starts_with('.')
        && !name.contains("..")
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Whether `name` can name an existing table or schema of a catalog: any
/// name but one that would leave the namespace's directory (a path
/// separator, `.` or `..`) or holds control characters. (Tables other
/// tools created may have names new ones may not.)
pub(crate) fn can_look_up(name: &str) -> bool {
    !name.is_empty()
        && !matches!(name, "." | "..")
        && !name.contains(['/', '\\'])
        && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_names_follow_the_rule_of_their_kind() {
        for good in ["t", "Orders_2026", "a-b.c", "x.lance", &"n".repeat(255)] {
            check_new(NameKind::Table, good).unwrap();
        }
        for bad in [
            "",
            "../escape",
            "sub/inner",
            "a\\b",
            ".hidden",
            "a..b",
            "é",
            "tab\tle",
            "a$b",
            "with space",
            &"n".repeat(256),
        ] {
            let error = check_new(NameKind::Table, bad).unwrap_err().to_string();
            assert!(error.contains("table name '"), "{bad}: {error}");
            assert!(error.contains("ASCII letters"), "{bad}: {error}");
        }
        check_new(NameKind::Tag, "release-1.0").unwrap();
        for bad in ["é", "a.", "x.lock", "../x", ""] {
            assert!(check_new(NameKind::Tag, bad).is_err(), "{bad}");
        }
        check_new(NameKind::Index, "my index (v2)").unwrap();
        assert!(check_new(NameKind::Index, "").is_err());
        assert!(check_new(NameKind::Index, "a\nb").is_err());
        assert!(can_look_up("my table") && can_look_up("é"));
        for bad in ["", ".", "..", "../x", "a/b", "a\\b", "a\0b"] {
            assert!(!can_look_up(bad), "{bad}");
        }
    }
}
