/**
 * A usage batch's parameters as array literals written by hand
 * (usage-columns.ts), read back by the real Postgres: every string comes back
 * as it was, whatever it holds; nulls are NULL; histograms lose only their
 * trailing zeros; and the sums per sub-account and per agency are those of the
 * rows.
 */
import t from 'tap'
import { createPool } from '@scoped/shared/db'
import { histogramText, plainArray, summed, textArray } from '@scoped/shared/usage-columns'
import type { UsageRow } from '@scoped/shared/usage-columns'
import { serverUrl } from '../helpers/database.js'

const pool = createPool(serverUrl, { max: 1, applicationName: 'scoped-api-test' })
t.teardown(() => pool.end())

t.test('any string comes back from a text[] literal as it was', async (t) => {
  const strings = ['/v1/agents', 'NULL', 'null', '', ' padded ', 'a,b', '{braces}', 'say "hi"', 'back\\slash', '\\"', 'tab\there', 'é ünïcode', '/v1/agents']
  const { rows } = await pool.query<{ value: string | null }>('SELECT unnest($1::text[]) AS value', [textArray(strings)])
  t.same(
    rows.map((row) => row.value),
    strings,
  )
})

t.test('numbers, UUIDs, timestamps and nulls come back from a plain literal', async (t) => {
  const { rows } = await pool.query<{ id: string | null; n: string; at: Date }>(
    'SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::timestamptz[]) AS r (id, n, at)',
    [
      plainArray(['7f9c2ba4-e88f-4a1b-9d3c-2b1e5a6f0c11', null]),
      plainArray([0, 9_007_199_254_740_991]),
      plainArray([new Date(0).toISOString(), new Date(Date.UTC(2026, 11, 1, 23, 59)).toISOString()]),
    ],
  )
  t.same(
    rows.map((row) => [row.id, row.n, row.at.getTime()]),
    [
      ['7f9c2ba4-e88f-4a1b-9d3c-2b1e5a6f0c11', '0', 0],
      [null, '9007199254740991', Date.UTC(2026, 11, 1, 23, 59)],
    ],
  )
})

t.test('a plain literal refuses any string that would not read as one element', async (t) => {
  for (const bad of [
    'a,b',
    '7f9c2ba4-e88f-4a1b-9d3c-2b1e5a6f0c11,7f9c2ba4-e88f-4a1b-9d3c-2b1e5a6f0c12',
    'NULL',
    'null',
    '',
    'say "hi"',
    'a b',
    '{x}',
    'back\\slash',
  ]) {
    t.throws(() => plainArray(['7f9c2ba4-e88f-4a1b-9d3c-2b1e5a6f0c11', bad]), /not a plain array element/, JSON.stringify(bad))
  }
})

t.test('a histogram loses only its trailing zeros', async (t) => {
  const slab = new Uint32Array(8)
  slab.set([9, 9, 0, 3, 0, 1, 0, 0])
  t.equal(histogramText(slab.subarray(2, 8)), '{0,3,0,1}', 'a view into the slab')
  t.equal(histogramText([0, 0, 0]), '{0}')
  t.equal(histogramText([5]), '{5}')
  const each = await pool.query<{ h: string }>('SELECT (unnest($1::text[]))::bigint[]::text AS h', [
    `{"${histogramText([1, 0, 2, 0])}","${histogramText([4])}"}`,
  ])
  t.same(
    each.rows.map((row) => row.h),
    ['{1,0,2}', '{4}'],
    'each element of the text[] is read as a bigint[]',
  )
})

t.test('rows are summed per bucket, sub-account (or agency), route, outcome and status class', async (t) => {
  const row = (over: Partial<UsageRow>): UsageRow => ({
    bucket: 60_000,
    keyId: 'k1',
    agencyId: 'a1',
    subAccountId: 's1',
    route: '/v1/agents',
    outcome: 'served',
    statusClass: 2,
    requests: 1,
    latency: [1],
    ...over,
  })
  const rows = [
    row({}),
    row({ keyId: 'k2', requests: 2, latency: [0, 2] }),
    row({ keyId: 'k3', subAccountId: 's2', requests: 4, latency: [0, 0, 4] }),
    row({ keyId: 'k4', subAccountId: null, requests: 8, latency: [8] }),
    row({ keyId: 'k1', bucket: 120_000, requests: 16, latency: [16] }),
    row({ keyId: 'k1', outcome: 'rate-limited', statusClass: 4, requests: 32, latency: [32] }),
    row({ keyId: 'k5', agencyId: 'a2', subAccountId: 's1', requests: 64, latency: [64] }),
  ]
  const bySubAccount = summed(rows, true).map((sum) => [sum.bucket, sum.agencyId, sum.subAccountId, sum.outcome, sum.requests, sum.latency])
  t.same(bySubAccount, [
    [60_000, 'a1', 's1', 'served', 3, [1, 2]],
    [60_000, 'a1', 's2', 'served', 4, [0, 0, 4]],
    [60_000, 'a1', null, 'served', 8, [8]],
    [120_000, 'a1', 's1', 'served', 16, [16]],
    [60_000, 'a1', 's1', 'rate-limited', 32, [32]],
    [60_000, 'a2', 's1', 'served', 64, [64]],
  ])
  const byAgency = summed(summed(rows, true), false).map((sum) => [sum.bucket, sum.agencyId, sum.subAccountId, sum.outcome, sum.requests, sum.latency])
  t.same(byAgency, [
    [60_000, 'a1', null, 'served', 15, [9, 2, 4]],
    [120_000, 'a1', null, 'served', 16, [16]],
    [60_000, 'a1', null, 'rate-limited', 32, [32]],
    [60_000, 'a2', null, 'served', 64, [64]],
  ])
})
