//! Local files read in place when they are small.
//!
//! Lance reads a local file of at most one block (4 KiB) as a whole, through
//! `object_store`'s `LocalFileSystem`, which runs every call on Tokio's
//! blocking pool: one thread hand-off to open the file and another to read
//! it. A table of many tiny fragments pays those hand-offs per fragment —
//! at 100,000 fragments of 10 rows, half the CPU time of a selective scan
//! went to waking threads. The sessions this crate creates read such files
//! (at most [`INLINE_READ_BYTES`]) on the task that asks for them: an `open`,
//! an `fstat` and one `pread` of a few KiB, cheaper than either hand-off.
//! Larger reads, and any request this path does not answer exactly as
//! `LocalFileSystem` would (a directory, a failed precondition, an invalid
//! range, any I/O error), go to `LocalFileSystem` itself, so errors and
//! metadata are its own.

use std::fmt;
use std::fs::{File, Metadata};
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use lance_io::object_store::providers::local::FileStoreProvider;
use lance_io::object_store::{
    ObjectStore as LanceStore, ObjectStoreParams, ObjectStoreProvider, ObjectStoreRegistry,
};
use object_store_014::local::LocalFileSystem;
use object_store_014::path::Path;
use object_store_014::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};
use url::Url;

/// The largest local read answered in place (larger ones use the blocking pool).
pub(crate) const INLINE_READ_BYTES: u64 = 64 * 1024;

/// A registry with Lance's providers, local files going through
/// [`InlineSmallReads`].
pub(crate) fn store_registry() -> Arc<ObjectStoreRegistry> {
    let registry = ObjectStoreRegistry::default();
    registry.insert("file", Arc::new(LocalFiles));
    Arc::new(registry)
}

/// Lance's local-file provider with small reads answered in place.
#[derive(Debug)]
struct LocalFiles;

#[async_trait]
impl ObjectStoreProvider for LocalFiles {
    async fn new_store(
        &self,
        base_path: Url,
        params: &ObjectStoreParams,
    ) -> lance_core::Result<LanceStore> {
        let mut store = FileStoreProvider.new_store(base_path, params).await?;
        store.inner = Arc::new(InlineSmallReads {
            inner: store.inner,
            paths: LocalFileSystem::new(),
        });
        Ok(store)
    }

    fn extract_path(&self, url: &Url) -> lance_core::Result<Path> {
        FileStoreProvider.extract_path(url)
    }

    fn calculate_object_store_prefix(
        &self,
        url: &Url,
        storage_options: Option<&std::collections::HashMap<String, String>>,
    ) -> lance_core::Result<String> {
        FileStoreProvider.calculate_object_store_prefix(url, storage_options)
    }
}

/// `LocalFileSystem` with whole-object and ranged reads of at most
/// [`INLINE_READ_BYTES`] done on the calling task.
#[derive(Debug)]
pub(crate) struct InlineSmallReads {
    inner: Arc<dyn ObjectStore>,
    /// Maps object paths to file paths as the inner store does.
    paths: LocalFileSystem,
}

impl fmt::Display for InlineSmallReads {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InlineSmallReads({})", self.inner)
    }
}

impl InlineSmallReads {
    /// The read, when it is small and plain; `None` sends it to the inner store.
    fn read_in_place(&self, location: &Path, options: &GetOptions) -> Option<GetResult> {
        if options.head || options.version.is_some() {
            return None;
        }
        let path = self.paths.path_to_filesystem(location).ok()?;
        let file = File::open(&path).ok()?;
        let metadata = file.metadata().ok()?;
        if metadata.is_dir() {
            return None;
        }
        let meta = ObjectMeta {
            location: location.clone(),
            last_modified: metadata.modified().ok()?.into(),
            size: metadata.len(),
            e_tag: Some(e_tag(&metadata)),
            version: None,
        };
        options.check_preconditions(&meta).ok()?;
        let range = match &options.range {
            Some(r) => r.as_range(meta.size).ok()?,
            None => 0..meta.size,
        };
        if range.end - range.start > INLINE_READ_BYTES {
            return None;
        }
        let bytes = read_exactly(&file, range.clone())?;
        Some(GetResult {
            payload: GetResultPayload::Stream(futures::stream::once(async { Ok(bytes) }).boxed()),
            meta,
            range,
            attributes: Attributes::default(),
            extensions: Default::default(),
        })
    }
}

/// The bytes of `range`, or `None` when the file is shorter (it changed).
fn read_exactly(file: &File, range: Range<u64>) -> Option<Bytes> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0_u8; (range.end - range.start) as usize];
    file.read_exact_at(&mut buf, range.start).ok()?;
    Some(Bytes::from(buf))
}

/// `LocalFileSystem`'s e-tag: inode, modification time in microseconds and
/// size (Lance compares e-tags from listings with those from reads).
fn e_tag(metadata: &Metadata) -> String {
    use std::os::unix::fs::MetadataExt;
    let mtime = metadata
        .modified()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .unwrap_or_default()
        .as_micros();
    format!("\"{:x}-{mtime:x}-{:x}\"", metadata.ino(), metadata.len())
}

#[async_trait]
impl ObjectStore for InlineSmallReads {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store_014::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store_014::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store_014::Result<GetResult> {
        match self.read_in_place(location, &options) {
            Some(result) => Ok(result),
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store_014::Result<Vec<Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store_014::Result<Path>>,
    ) -> BoxStream<'static, object_store_014::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(
        &self,
        prefix: Option<&Path>,
    ) -> BoxStream<'static, object_store_014::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store_014::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(
        &self,
        prefix: Option<&Path>,
    ) -> object_store_014::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store_014::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store_014::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use object_store_014::{Error, GetRange};

    use super::*;

    fn store() -> InlineSmallReads {
        InlineSmallReads {
            inner: Arc::new(LocalFileSystem::new()),
            paths: LocalFileSystem::new(),
        }
    }

    fn path(file: &std::path::Path) -> Path {
        Path::from_absolute_path(file).unwrap()
    }

    async fn read(
        store: &dyn ObjectStore,
        at: &Path,
        options: GetOptions,
    ) -> (bool, ObjectMeta, Bytes) {
        let result = store.get_opts(at, options).await.unwrap();
        let in_place = matches!(result.payload, GetResultPayload::Stream(_));
        let meta = result.meta.clone();
        (in_place, meta, result.bytes().await.unwrap())
    }

    #[tokio::test]
    async fn small_reads_match_local_file_system_and_large_ones_go_to_it() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        let large = dir.path().join("large");
        let data: Vec<u8> = (0..=255).cycle().take(3000).collect();
        std::fs::write(&small, &data).unwrap();
        std::fs::write(&large, vec![7_u8; INLINE_READ_BYTES as usize + 1]).unwrap();
        let (ours, theirs) = (store(), LocalFileSystem::new());
        let ranges = [
            None,
            Some(GetRange::Bounded(10..20)),
            Some(GetRange::Bounded(2990..5000)),
            Some(GetRange::Offset(2999)),
            Some(GetRange::Suffix(7)),
        ];
        for range in ranges {
            let options = || GetOptions {
                range: range.clone(),
                ..Default::default()
            };
            let (in_place, meta, bytes) = read(&ours, &path(&small), options()).await;
            let (_, expected_meta, expected) = read(&theirs, &path(&small), options()).await;
            assert!(in_place, "{range:?}");
            assert_eq!((meta, bytes), (expected_meta, expected), "{range:?}");
        }
        let (in_place, _, bytes) = read(&ours, &path(&large), GetOptions::default()).await;
        assert!(!in_place, "a read above the limit goes to LocalFileSystem");
        assert_eq!(bytes.len(), INLINE_READ_BYTES as usize + 1);
    }

    #[tokio::test]
    async fn failing_reads_give_local_file_system_errors() {
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("small");
        std::fs::write(&small, b"0123456789").unwrap();
        let (ours, theirs) = (store(), LocalFileSystem::new());
        let cases = [
            ("missing", dir.path().join("missing"), GetOptions::default()),
            (
                "a directory",
                dir.path().to_path_buf(),
                GetOptions::default(),
            ),
            (
                "a range past the end",
                small.clone(),
                GetOptions {
                    range: Some(GetRange::Bounded(20..30)),
                    ..Default::default()
                },
            ),
            (
                "a stale e-tag",
                small.clone(),
                GetOptions {
                    if_match: Some("\"not-the-e-tag\"".to_string()),
                    ..Default::default()
                },
            ),
        ];
        let mut kinds = vec![];
        for (case, file, options) in cases {
            let err = ours
                .get_opts(&path(&file), options.clone())
                .await
                .unwrap_err();
            let expected = theirs.get_opts(&path(&file), options).await.unwrap_err();
            assert_eq!(err.to_string(), expected.to_string(), "{case}");
            kinds.push(match err {
                Error::NotFound { .. } => "not found",
                Error::Precondition { .. } => "precondition",
                _ => "other",
            });
        }
        assert_eq!(kinds, ["not found", "not found", "other", "precondition"]);
    }
}
