//! **plans** — bytes of encoded plans against the number of fragments: a
//! scan carries fragment ids, never the manifest, so its size grows with
//! the id lists only.

use std::sync::Arc;
use std::time::Instant;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion_lance::{LanceLogicalCodec, LancePhysicalCodec, resolve_lance_tables};
use datafusion_proto::bytes::{
    logical_plan_to_bytes_with_extension_codec, physical_plan_from_bytes_with_extension_codec,
    physical_plan_to_bytes_with_extension_codec,
};
use lance_file::version::LanceFileVersion;

use crate::common::{Args, Stats, exists, write_lance};

const QUERY: &str = "SELECT l_returnflag, sum(l_quantity) FROM t WHERE l_discount > 0.05 \
                     GROUP BY l_returnflag";

/// Partitions of every plan measured (fixed: the bytes do not depend on the
/// machine's cores).
const PARTITIONS: usize = 8;

pub(crate) fn manifest_bytes(table: &std::path::Path) -> u64 {
    std::fs::read_dir(table.join("_versions"))
        .expect("versions directory")
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .max()
        .unwrap_or(0)
}

async fn plans(ctx: &SessionContext) -> (Arc<dyn ExecutionPlan>, Vec<u8>) {
    let df = ctx.sql(QUERY).await.expect("plan");
    let state = ctx.state();
    let logical = state.optimize(df.logical_plan()).expect("optimize");
    let logical = resolve_lance_tables(logical, &state)
        .await
        .expect("resolve");
    let logical_bytes =
        logical_plan_to_bytes_with_extension_codec(&logical, &LanceLogicalCodec::new())
            .expect("encode logical");
    let physical = state
        .create_physical_plan(&logical)
        .await
        .expect("physical");
    (physical, logical_bytes.to_vec())
}

pub(crate) async fn plan_bytes_table(args: &Args) {
    println!(
        "\n## Encoded plan size against fragments ({PARTITIONS} partitions)\n\n`{QUERY}`: \
         bytes of the physical plan (`LancePhysicalCodec`) and of the resolved logical plan \
         (`LanceLogicalCodec`), next to the table's manifest. Time: encode + decode of the \
         physical plan, median of {} runs (min–max).\n",
        args.iters
    );
    println!(
        "| fragments | manifest | physical plan | logical plan | physical bytes per added fragment | encode + decode |"
    );
    println!("|---|---|---|---|---|---|");
    let codec = LancePhysicalCodec::new();
    let mut first: Option<(usize, usize)> = None;
    for fragments in [10usize, 1_000, 10_000] {
        let path = args.dir.join(format!("plan-bytes-{fragments}.lance"));
        let uri = path.to_string_lossy().to_string();
        if !exists(&path) {
            write_lance(&uri, fragments * 10, 10, LanceFileVersion::V2_1).await;
        }
        let ctx = datafusion_lance::lance_session_context(
            SessionConfig::new().with_target_partitions(PARTITIONS),
        );
        ctx.sql(&format!(
            "CREATE EXTERNAL TABLE t STORED AS LANCE LOCATION '{uri}'"
        ))
        .await
        .expect("register");
        let (physical, logical) = plans(&ctx).await;
        let bytes = physical_plan_to_bytes_with_extension_codec(Arc::clone(&physical), &codec)
            .expect("encode")
            .len();
        let mut walls = Vec::new();
        let started_cpu = crate::common::cpu_time();
        for _ in 0..args.iters.max(1) {
            let started = Instant::now();
            let encoded =
                physical_plan_to_bytes_with_extension_codec(Arc::clone(&physical), &codec)
                    .expect("encode");
            physical_plan_from_bytes_with_extension_codec(&encoded, &ctx.task_ctx(), &codec)
                .expect("decode");
            walls.push(started.elapsed());
        }
        let time = Stats::from_runs(walls, crate::common::cpu_time() - started_cpu);
        let growth = match first {
            None => "—".to_string(),
            Some((n, b)) => format!("{:.2}", (bytes - b) as f64 / (fragments - n) as f64),
        };
        first.get_or_insert((fragments, bytes));
        println!(
            "| {fragments} | {} B | {bytes} B | {} B | {growth} | {:.3} ms ({:.3}–{:.3}) |",
            manifest_bytes(&path),
            logical.len(),
            time.median.as_secs_f64() * 1e3,
            time.min.as_secs_f64() * 1e3,
            time.max.as_secs_f64() * 1e3,
        );
    }
}
