/**
 * The usage report's statement reads an agency's rows through an index, not
 * the whole table (issue 31, "Speed and scale"): with 30 days of hourly rows
 * seeded for many agencies, one of them a small share of the table, their
 * summaries without the key (migration 025) beside them, and the statistics
 * gathered (ANALYZE), the planner's plan (EXPLAIN, FORMAT JSON) of the
 * statement usageReport runs names, in every partition it reads, the agency
 * index of the agency's summary (migration 026) for the default grouping, of
 * the sub-accounts' summaries (025) when grouped by sub-account and of
 * usage_hours when grouped by key, and no sequential scan. No timing here: the bench
 * (BENCH_ONLY=usage-scale) measures the speed.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { rolledUntil, usageQuery } from '@scoped/agency-service/usage/usage-report'
import type { GroupBy } from '@scoped/agency-service/usage/usage-report'
import { createTestDatabase } from '../helpers/database.js'
import type { TestDatabase } from '../helpers/database.js'

const HOUR = 3_600_000
const DAYS = 30
const AGENCIES = 60
const KEYS_PER_AGENCY = 4

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  Plans?: PlanNode[]
}

function nodes(node: PlanNode): PlanNode[] {
  return [node, ...(node.Plans ?? []).flatMap(nodes)]
}

async function indexesRead(
  db: TestDatabase,
  agencyId: string,
  groupBy: GroupBy | null,
): Promise<{ parents: string[]; indexes: string[]; seqScans: unknown[] }> {
  const to = new Date()
  const request = { from: new Date(to.getTime() - DAYS * 86_400_000), to, granularity: 'hour', groupBy } as const
  const { text, values } = usageQuery({ agencyId }, request, await rolledUntil(db.pool))
  const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values)
  const plan = nodes(rows[0]!['QUERY PLAN'][0]!.Plan)
  const indexes = [...new Set(plan.flatMap((node) => (node['Index Name'] === undefined ? [] : [node['Index Name']])))]
  const parents = await db.pool.query<{ parent: string }>(
    `SELECT DISTINCT p.relname AS parent FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid JOIN pg_class p ON p.oid = i.inhparent WHERE c.relname = ANY($1)`,
    [indexes],
  )
  return {
    parents: parents.rows.map((row) => row.parent),
    indexes,
    seqScans: plan.filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name']),
  }
}

t.test("the report of an agency over 30 days of hourly rows reads them through an agency index: the summaries' unless by key", async (t) => {
  const db = await createTestDatabase(t)
  const thisHour = Math.floor(Date.now() / HOUR) * HOUR
  const first = new Date(thisHour - DAYS * 24 * HOUR)
  const last = new Date(thisHour - HOUR)
  await db.pool.query('SELECT usage_prepare($1, $2)', [first.toISOString(), new Date(thisHour).toISOString()])
  const agencies = Array.from({ length: AGENCIES }, () => randomUUID())
  // Every key of every agency, every hour: the agency asked about holds 1/60 of the rows.
  const { rowCount } = await db.pool.query(
    `INSERT INTO usage_hours (bucket, key_id, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
     SELECT h, md5(a::text || k)::uuid, a, NULL, '/v1/agents', 'served', 2, 3, '{0,1,2}'
       FROM unnest($1::uuid[]) AS a, generate_series(1, $2::int) AS k, generate_series($3::timestamptz, $4::timestamptz, interval '1 hour') AS h`,
    [agencies, KEYS_PER_AGENCY, first.toISOString(), last.toISOString()],
  )
  t.equal(rowCount, AGENCIES * KEYS_PER_AGENCY * DAYS * 24, 'rows seeded')
  // The summaries, as the writer keeps them: every agency's keys summed per hour.
  await db.pool.query(
    `INSERT INTO usage_summary_hours (bucket, agency_id, sub_account_id, route, outcome, status_class, requests, latency)
     SELECT bucket, agency_id, sub_account_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency) FROM usage_hours GROUP BY 1, 2, 3, 4, 5, 6`,
  )
  await db.pool.query(
    `INSERT INTO usage_agency_hours (bucket, agency_id, route, outcome, status_class, requests, latency)
     SELECT bucket, agency_id, route, outcome, status_class, sum(requests), usage_histogram_sum(latency) FROM usage_summary_hours GROUP BY 1, 2, 3, 4, 5`,
  )
  await db.pool.query('ANALYZE usage_hours, usage_summary_hours, usage_agency_hours')
  for (const [groupBy, parent] of [
    [null, 'usage_agency_hours_pkey'],
    ['sub-account', 'usage_summary_hours_agency'],
    ['key', 'usage_hours_agency'],
  ] as const) {
    const { parents, indexes, seqScans } = await indexesRead(db, agencies[7]!, groupBy)
    t.ok(indexes.length > 0, `by ${groupBy}: the plan reads an index`)
    t.same(parents, [parent], `by ${groupBy}: every index read is a partition's ${parent} (${indexes.join(', ')})`)
    t.same(seqScans, [], `by ${groupBy}: no partition is scanned whole`)
  }
})
