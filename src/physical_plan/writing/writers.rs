//! Running a statement's writers: Lance's errors said of the table, and
//! waiting for every writer so a failed statement leaves no file behind.

use datafusion::common::runtime::JoinSet;
use datafusion::error::{DataFusionError, Result as DFResult};
use lance_table::format::Fragment;

use crate::error::Error;
use crate::physical_plan::target::{OpenTarget, WriteTarget};

/// Converts a Lance error raised while writing `target`.
pub(crate) fn write_error(
    target: &WriteTarget,
    action: &'static str,
    e: lance::Error,
) -> DataFusionError {
    Error::lance(action, &target.location.uri, e).into()
}

/// Waits for every writer of a statement. Each yields its result `T` and the
/// fragments it wrote. A failing writer does not stop the others (writers
/// share no state); once all have ended, the fragments of the successful
/// ones are deleted and the first error returned — Lance removes a failing
/// writer's own files — so a failed statement leaves no file behind.
pub(crate) async fn join_writers<T: Send + 'static>(
    mut writers: JoinSet<DFResult<(T, Vec<Fragment>)>>,
    target: &OpenTarget,
) -> DFResult<(Vec<T>, Vec<Fragment>)> {
    let mut results = Vec::new();
    let mut fragments = Vec::new();
    let mut failure: Option<DataFusionError> = None;
    while let Some(joined) = writers.join_next().await {
        let result = joined.unwrap_or_else(|e| {
            Err(DataFusionError::Execution(format!(
                "a writer task failed: {e}"
            )))
        });
        match result {
            Ok((r, f)) => {
                results.push(r);
                fragments.extend(f);
            }
            Err(e) if failure.is_none() => failure = Some(e),
            Err(_) => {}
        }
    }
    match failure {
        Some(e) => {
            target.remove_files(&fragments).await;
            Err(e)
        }
        None => Ok((results, fragments)),
    }
}
