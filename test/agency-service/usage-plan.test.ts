/**
 * The usage report's statement reads an agency's rows through an index, not
 * the whole table (issue 31, "Speed and scale"): with 30 days of hourly rows
 * seeded for many agencies, one of them a small share of the table, and the
 * statistics gathered (ANALYZE), the planner's plan (EXPLAIN, FORMAT JSON) of
 * the statement usageReport runs names an index of usage_hours' agency index
 * in every partition it reads, and no sequential scan. No timing here: the
 * bench (BENCH_ONLY=usage-scale) measures the speed.
 */
import { randomUUID } from 'node:crypto'
import t from 'tap'
import { usageQuery } from '@scoped/agency-service/usage/usage-report'
import { createTestDatabase } from '../helpers/database.js'

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

t.test('the report of an agency over 30 days of hourly rows reads them through the agency index', async (t) => {
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
  await db.pool.query('ANALYZE usage_hours')
  const to = new Date()
  const { text, values } = usageQuery({ agencyId: agencies[7]! }, { from: new Date(to.getTime() - DAYS * 86_400_000), to, granularity: 'hour', groupBy: null })
  const { rows } = await db.pool.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`EXPLAIN (FORMAT JSON) ${text}`, values)
  const plan = nodes(rows[0]!['QUERY PLAN'][0]!.Plan)
  const indexes = [...new Set(plan.flatMap((node) => (node['Index Name'] === undefined ? [] : [node['Index Name']])))]
  t.ok(indexes.length > 0, `the plan reads an index: ${JSON.stringify(plan.map((node) => node['Node Type']))}`)
  const parents = await db.pool.query<{ parent: string }>(
    `SELECT DISTINCT p.relname AS parent FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid JOIN pg_class p ON p.oid = i.inhparent WHERE c.relname = ANY($1)`,
    [indexes],
  )
  t.same(
    parents.rows.map((row) => row.parent),
    ['usage_hours_agency'],
    `every index read is a partition's usage_hours_agency (${indexes.join(', ')})`,
  )
  t.same(
    plan.filter((node) => node['Node Type'] === 'Seq Scan').map((node) => node['Relation Name']),
    [],
    'no partition is scanned whole',
  )
})
