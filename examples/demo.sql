-- The demo script run by `make run` (lance-sql -f examples/demo.sql).
CREATE EXTERNAL TABLE lineitem STORED AS LANCE LOCATION 'target/demo/lineitem.lance';

-- Row count straight from the manifest.
SELECT count(*) AS rows FROM lineitem;

-- TPC-H Q6-like: filters and projection pushed into the Lance scan.
SELECT sum(l_extendedprice * l_discount) AS revenue
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24;

-- TPC-H Q1-like aggregation.
SELECT l_returnflag, l_linestatus, count(*) AS n, sum(l_quantity) AS qty,
       round(avg(l_extendedprice), 2) AS avg_price
FROM lineitem
GROUP BY l_returnflag, l_linestatus
ORDER BY l_returnflag, l_linestatus;

-- What the scan does: pinned version, partitions, pushed filter and limit.
EXPLAIN SELECT l_orderkey, embedding FROM lineitem WHERE l_quantity > 49 LIMIT 3;

-- Time travel: the version the tag 'first_load' points at.
CREATE EXTERNAL TABLE lineitem_v1 STORED AS LANCE LOCATION 'target/demo/lineitem.lance'
OPTIONS ('lance.tag' 'first_load');
SELECT count(*) AS rows_at_first_load FROM lineitem_v1;
-- ... or read any version, tag or time inside a query.
SELECT (SELECT count(*) FROM lineitem) - (SELECT count(*) FROM lineitem VERSION AS OF 'first_load')
       AS rows_added_since_first_load;

-- Quoted paths work too.
SELECT l_orderkey, embedding FROM 'target/demo/lineitem.lance' WHERE l_orderkey < 3 ORDER BY l_orderkey;

-- Writes: a table from a query, then row-level DML and an upsert; one version each.
COPY (SELECT l_orderkey AS id, l_quantity AS qty FROM lineitem WHERE l_orderkey < 1000)
TO 'target/demo/orders.lance' STORED AS LANCE;
CREATE EXTERNAL TABLE orders STORED AS LANCE LOCATION 'target/demo/orders.lance';
UPDATE orders SET qty = qty * 2 WHERE id < 10;
DELETE FROM orders WHERE id IN (SELECT l_orderkey FROM lineitem WHERE l_quantity > 45 AND l_orderkey < 1000);
SELECT * FROM lance_merge('orders', (SELECT 1 AS id, 0.0 AS qty UNION ALL SELECT 5000, 1.0), 'id');
SELECT version, operation, fragments, rows FROM lance_versions('orders') ORDER BY version;

-- The shared Lance session.
SELECT * FROM lance_cache_stats();
