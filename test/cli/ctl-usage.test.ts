/**
 * `ctl usage` as a process (issue 31): an agency's, a sub-account's and one
 * key's usage, printed as the API's `data` object, and bad input refused
 * with exit 1 and the envelope on stderr.
 */
import t from 'tap'
import { LATENCY_BUCKETS } from '@scoped/shared/usage'
import { writeUsageBatch } from '@scoped/shared/usage-store'
import { createTestDatabase } from '../helpers/database.js'
import { runCtl } from '../helpers/processes.js'

type Json = Record<string, unknown>
interface Report {
  granularity: string
  groupBy: string | null
  series: Array<{ group: string | null; points: Array<{ at: string; requests: number }> }>
}

t.test('ctl usage prints the usage of an agency, a sub-account or a key', async (t) => {
  const db = await createTestDatabase(t)
  const env = { DATABASE_URL: db.url }
  const ok = async (args: string[]): Promise<Json> => {
    const result = await runCtl(args, env)
    t.equal(result.status, 0, `ctl ${args.join(' ')}: ${result.stderr}`)
    return result.json as Json
  }
  const agency = await ok(['agency', 'create', '--name', 'Acme'])
  const sub = await ok(['sub-account', 'create', '--agency', String(agency['id']), '--name', 'West'])
  const key = await ok(['key', 'create', '--sub-account', String(sub['id']), '--name', 'k'])
  const day = Date.UTC(2026, 10, 20)
  const latency = new Array<number>(LATENCY_BUCKETS).fill(0)
  latency[3] = 4
  const row = {
    bucket: day,
    keyId: String(key['id']),
    agencyId: String(agency['id']),
    subAccountId: String(sub['id']),
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: 4,
    latency,
  }
  await writeUsageBatch(db.pool, { replicaId: 'ctl', seq: 1, minutes: [], hours: [], days: [row] })
  const range = ['--from', '2026-11-19T00:00:00Z', '--to', '2026-11-22T00:00:00Z', '--granularity', 'day']
  for (const owner of [
    ['--agency', agency['id']],
    ['--sub-account', sub['id']],
    ['--key', key['id']],
  ]) {
    const report = (await ok(['usage', ...owner.map(String), ...range, '--group-by', 'key'])) as unknown as Report
    t.equal(report.granularity, 'day')
    t.equal(report.groupBy, 'key')
    t.equal(report.series.length, 1, String(owner[0]))
    t.equal(report.series[0]!.group, key['id'])
    t.same(
      report.series[0]!.points.map((point) => point.requests),
      [0, 4, 0],
      'three days, zeros included',
    )
  }
  for (const [args, message] of [
    [['usage', ...range], /exactly one of --agency, --sub-account and --key/],
    [
      ['usage', '--agency', String(agency['id']), '--granularity', 'minute', '--from', '2026-11-19T00:00:00Z', '--to', '2026-11-22T00:00:00Z'],
      /--to is too far/,
    ],
    [['usage', '--agency', '00000000-0000-4000-8000-000000000000'], /Not found/],
  ] as const) {
    const result = await runCtl([...args], env)
    t.equal(result.status, 1, args.join(' '))
    t.match(result.json, { success: false, message })
  }
})
