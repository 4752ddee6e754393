/**
 * A usage batch's rows as the parameters of its statement (usage-store.ts):
 * one array literal per column, per key ($1–$9), summed per sub-account
 * ($10–$17) and per agency ($18–$24). A busy replica's batch holds a hundred
 * thousand rows or more, and building these was half of its flush's time:
 * the literals are written here, quoting only the strings that may need it,
 * routes and outcomes (pg's generic conversion quotes and escapes every
 * element), and the sums are kept in nested maps keyed by the rows' own
 * strings, so no key is built per row.
 */

/** One row's addition: the counts of one key, bucket, route, outcome and status class. */
export interface UsageRow {
  /** The bucket's start, epoch milliseconds. */
  bucket: number
  keyId: string
  agencyId: string
  subAccountId: string | null
  route: string
  outcome: string
  /** The status code's hundreds (1–5). */
  statusClass: number
  requests: number
  latency: ArrayLike<number>
}

/** A histogram as an array literal, without its trailing zeros (a missing element counts 0 everywhere histograms are read or added). */
export function histogramText(latency: ArrayLike<number>): string {
  let end = latency.length
  while (end > 1 && latency[end - 1] === 0) end--
  const counts = latency instanceof Uint32Array ? latency.subarray(0, end) : Array.prototype.slice.call(latency, 0, end)
  return `{${counts.join(',')}}`
}

/** A map's entry for `key`, made by `make` when missing. */
function entry<K, V>(map: Map<K, V>, key: K, make: () => NoInfer<V>): V {
  let found = map.get(key)
  if (found === undefined) {
    found = make()
    map.set(key, found)
  }
  return found
}

/** What array_in reads as it is: no brace, comma, quote, backslash or space, and not the word NULL. */
const PLAIN = /^(?!null$)[0-9A-Za-z_.:+-]+$/i

/**
 * The array literal of values that array_in reads as they are: numbers, UUIDs and timestamps in ISO form, null as
 * NULL. Any other string throws: one holding a comma would shift every later row of its column onto another row
 * (another key's, another tenant's).
 */
export function plainArray(values: ReadonlyArray<string | number | null>): string {
  const elements = values.map((value) => {
    if (value === null) return 'NULL'
    if (typeof value === 'string' && !PLAIN.test(value)) throw new Error(`not a plain array element: ${JSON.stringify(value)}`)
    return value
  })
  return `{${elements.join(',')}}`
}

/** The array literal of any strings: each quoted, its quotes and backslashes escaped (once per distinct string). */
export function textArray(values: readonly string[]): string {
  const forms = new Map<string, string>()
  const quoted = values.map((value) => entry(forms, value, () => `"${value.replace(/[\\"]/g, '\\$&')}"`))
  return `{${quoted.join(',')}}`
}

/** The histograms of `rows` as one text[] literal of array literals (each quoted: it holds commas and braces, never quotes). */
function histogramsLiteral(rows: readonly UsageRow[]): string {
  return `{${rows.map((row) => `"${histogramText(row.latency)}"`).join(',')}}`
}

type Sum = UsageRow & { latency: number[] }
type Level<V> = Map<string | number | null, V>

/**
 * `rows` summed per bucket, agency, sub-account (when `bySubAccount`), route, outcome and status class, their
 * histograms added element by element: summed here rather than in Postgres, where a batch's statement spent a good
 * share of its time on it.
 */
export function summed(rows: readonly UsageRow[], bySubAccount: boolean): UsageRow[] {
  const groups: Level<Level<Level<Level<Level<Level<Sum>>>>>> = new Map()
  const sums: Sum[] = []
  const level = <K, V>(): Map<K, V> => new Map<K, V>()
  for (const row of rows) {
    const subAccountId = bySubAccount ? row.subAccountId : null
    const byBucket = entry(entry(groups, row.agencyId, level), subAccountId, level)
    const byStatus = entry(entry(entry(byBucket, row.bucket, level), row.route, level), row.outcome, level)
    const sum = entry(byStatus, row.statusClass, () => {
      const made: Sum = { ...row, keyId: '', subAccountId, requests: 0, latency: [] }
      sums.push(made)
      return made
    })
    sum.requests += row.requests
    for (let i = 0; i < row.latency.length; i++) sum.latency[i] = (sum.latency[i] ?? 0) + row.latency[i]!
  }
  return sums
}

/** The ISO form of each row's bucket: a batch's rows share a few buckets, so each is written once. */
function bucketsLiteral(rows: readonly UsageRow[]): string {
  const forms = new Map<number, string>()
  return plainArray(rows.map((row) => entry(forms, row.bucket, () => new Date(row.bucket).toISOString())))
}

function countsLiterals(rows: readonly UsageRow[]): string[] {
  return [
    textArray(rows.map((row) => row.route)),
    textArray(rows.map((row) => row.outcome)),
    plainArray(rows.map((row) => row.statusClass)),
    plainArray(rows.map((row) => row.requests)),
    histogramsLiteral(rows),
  ]
}

/** The parameters of a batch's rows: per key ($1–$9), summed per sub-account ($10–$17) and per agency ($18–$24). */
export function usageColumns(rows: readonly UsageRow[]): string[] {
  const summaries = summed(rows, true)
  const agencies = summed(summaries, false)
  return [
    bucketsLiteral(rows),
    plainArray(rows.map((row) => row.keyId)),
    plainArray(rows.map((row) => row.agencyId)),
    plainArray(rows.map((row) => row.subAccountId)),
    ...countsLiterals(rows),
    bucketsLiteral(summaries),
    plainArray(summaries.map((row) => row.agencyId)),
    plainArray(summaries.map((row) => row.subAccountId)),
    ...countsLiterals(summaries),
    bucketsLiteral(agencies),
    plainArray(agencies.map((row) => row.agencyId)),
    ...countsLiterals(agencies),
  ]
}
