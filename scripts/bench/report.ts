/**
 * The run's report: Markdown on stdout, and the whole run as JSON under
 * bench-results/<ISO time>.json (git-ignored).
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { ColdPath, ColdPaths } from './cold-paths.js'
import type { Flood } from './flood.js'
import { UNKNOWN_ENTRIES_BOUND } from './flood.js'
import type { MillionKeys } from './million-keys.js'
import { LOOKUP_P99_TARGET_MS, WARM_UP_LOOKUPS } from './million-keys.js'
import type { Machine } from './proc-stats.js'
import { projectRoot } from '../../test/helpers/processes.js'
import type { Paired } from './paired.js'
import type { RoundSample } from './rounds.js'
import type { SideBySide } from './side-by-side.js'
import type { Soak } from './soak.js'
import { SOAK_GROWTH_TARGET } from './soak.js'
import type { Check, TargetSummary } from './summary.js'
import { BARE, GATEWAY, NO_CHECKS, non200, summarize, usageCheck, warmChecks } from './summary.js'
import type { UsageScale } from './usage-scale.js'
import { usageScaleChecks, usageScaleSection } from './usage-scale-report.js'

export interface Settings {
  rounds: number
  seconds: number
  connections: number
  soakSeconds: number
  keys: number
  floodKeys: number
  floodConnections: number
  coldKeys: number
  sideWindows: number
  /** Seconds of each of the two targets in the paired measurement. */
  pairedSeconds: number
  /** Keys a replica counts in one minute, and reports timed per query, in the usage-at-scale step. */
  usageKeys: number
  usageQueries: number
}

export interface Run {
  startedAt: string
  finishedAt: string
  machine: Machine
  /** What sent the load (load-generator.ts): wrk, or the benchmark's Node client. */
  generator: { name: 'wrk' | 'node'; description: string }
  settings: Settings
  notes: string[]
  rounds: RoundSample[]
  paired: Paired
  /** The bare proxy and the no-check forwarder, paired the same way. */
  ceiling: Paired
  /** The gateway with USAGE=off and the gateway as configured by default, paired the same way. */
  usage: Paired
  side: SideBySide
  million: MillionKeys
  cold: ColdPaths
  soak: Soak
  flood: Flood
  usageScale: UsageScale
}

export interface Report extends Run {
  summary: TargetSummary[]
  checks: Check[]
}

const ms = (value: number): string => value.toFixed(2)
const mib = (value: number): string => value.toFixed(0)
const whole = (value: number): string => Math.round(value).toLocaleString('en-US')
const times = (ratio: number): string => `${ratio.toFixed(2)} ×`
const pct = (value: number): string => `${(value * 100).toFixed(1)} %`
const per = (value: number | undefined): string => (value === undefined ? '–' : value.toFixed(3))
const mark = (met: boolean | null): string => (met === null ? '' : met ? 'met' : '**NOT MET**')
const statuses = (counts: Record<string, number>): string =>
  Object.entries(counts)
    .map(([status, count]) => `${status}: ${whole(count)}`)
    .join(', ')

function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n')
}

export function buildReport(run: Run): Report {
  const { million, soak, flood, side } = run
  const checks: Check[] = [
    ...warmChecks(run.paired, run.ceiling, run.rounds),
    usageCheck(run.usage),
    {
      name: 'gateway / bare proxy CPU per request, side by side',
      value: `${side.medians[GATEWAY]!.ratio.toFixed(2)} ×`,
      target: 'reported (the throughput target needs about ≤ 1.0 ×)',
      met: null,
    },
    {
      name: `unknown-key lookup p99, ${whole(million.rows)} keys in Postgres`,
      value: `${ms(million.latency.p99Ms)} ms`,
      target: `< ${LOOKUP_P99_TARGET_MS} ms`,
      met: million.latency.p99Ms < LOOKUP_P99_TARGET_MS,
    },
    { name: 'lookup plan uses the key_hash unique index', value: million.usesIndex ? million.index : 'no', target: 'yes', met: million.usesIndex },
    { name: `gateway RSS growth over a ${soak.seconds} s soak`, value: pct(soak.growth), target: `< ${pct(SOAK_GROWTH_TARGET)}`, met: soak.met },
    {
      name: `unknown-key cache entries under a flood of ${whole(flood.keys)} keys`,
      value: whole(flood.unknownEntriesMax),
      target: `≤ ${whole(UNKNOWN_ENTRIES_BOUND)}`,
      met: flood.bounded,
    },
    ...usageScaleChecks(run.usageScale),
  ]
  return { ...run, summary: summarize(run.rounds), checks }
}

function coldRow(name: string, cold: ColdPath): string[] {
  const hits = Object.entries(cold.lookups)
    .filter(([, count]) => count > 0)
    .map(([cell, count]) => `${cell} ${count}`)
    .join(', ')
  return [name, ms(cold.p50Ms), ms(cold.p99Ms), ms(cold.maxMs), per(cold.postgresPerKey), per(cold.redisPerKey), hits, statuses(cold.statuses)]
}

/** Which generator sent the load, and how its figures are to be read. */
export function generatorLine(generator: Run['generator']): string {
  if (generator.name === 'node') return `Load generator: ${generator.description}.`
  return (
    `Load generator: ${generator.description}, in a process of its own for each measurement (one per target when two or three are measured at once); ` +
    `its connections open before timing starts, and its latency percentiles ` +
    `are its own (corrected for coordinated omission). "non-200" counts answers of 400 or more and requests without an answer (wrk counts no other statuses apart). ` +
    `The flood and the cold paths send a different key per request, which wrk cannot: they use the Node client.`
  )
}

function sideLoad(side: SideBySide): string {
  if (side.rate === undefined) return `${side.connections} closed loops, each sending one request to every target below at the same moment`
  return `each target below gets ${whole(side.rate)} requests/s (a quarter of the slower paired target's throughput) over ${side.connections} connections of a wrk process of its own, all in the same seconds`
}

export function markdown(report: Report, jsonFile: string): string {
  return [
    ...header(report),
    ...roundSections(report),
    ...pairedSection(report),
    '',
    '## Targets',
    '',
    table(
      ['check', 'value', 'target', ''],
      report.checks.map((c) => [c.name, c.value, c.target, mark(c.met)]),
    ),
    ...sideBySideSection(report.side),
    ...coldSection(report),
    ...millionSection(report.million),
    ...memorySection(report),
    ...usageScaleSection(report.usageScale),
    '',
    `Whole run: ${jsonFile}`,
    '',
  ].join('\n')
}

function header(report: Report): string[] {
  const { machine: m, settings: s } = report
  return [
    `# Gateway benchmark, ${report.startedAt}`,
    '',
    `Machine: ${m.cpuModel}, ${m.cores} cores, ${whole(m.memoryMiB)} MiB, Node ${m.node}, Linux ${m.kernel}; load average at start ${m.loadAverage.join(' ')}.`,
    `Warm key: GET /v1/agents, ${s.rounds} rounds × ${s.seconds} s per target, interleaved, the bare proxy and the gateway always one right after the other; ` +
      `${s.connections} keep-alive connections, closed loop, from a generator process of its own.`,
    generatorLine(report.generator),
    ...report.notes.map((note) => `Note: ${note}`),
  ]
}

/** Every round of the warm key, then the median over rounds. */
function roundSections(report: Report): string[] {
  const rounds = table(
    ['round', 'target', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU µs/req', 'RSS MiB start → end', 'PG trips/req', 'Redis trips/req', 'non-200'],
    report.rounds.map((r) => [
      String(r.round),
      r.target,
      whole(r.load.perSecond),
      ms(r.load.p50Ms),
      ms(r.load.p99Ms),
      ms(r.load.p999Ms),
      r.cpuUsPerRequest.toFixed(0),
      `${mib(r.rssStartMiB)} → ${mib(r.rssEndMiB)}`,
      per(r.trips?.postgresPerRequest),
      per(r.trips?.redisPerRequest),
      whole(non200(r.load.statuses)),
    ]),
  )
  const medians = table(
    ['target', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU µs/req', 'max RSS MiB', 'PG trips/req', 'Redis trips/req', 'non-200'],
    report.summary.map((t) => [
      t.target,
      whole(t.perSecond),
      ms(t.p50Ms),
      ms(t.p99Ms),
      ms(t.p999Ms),
      t.cpuUsPerRequest.toFixed(0),
      mib(t.rssMaxMiB),
      per(t.postgresPerRequest),
      per(t.redisPerRequest),
      whole(t.non200),
    ]),
  )
  return ['', '## Warm key, per round', '', rounds, '', '## Warm key, median over rounds', '', medians]
}

function pairedSection(report: Report): string[] {
  const { paired, ceiling, usage } = report
  const rows = [paired, ceiling, usage].flatMap((pair, index) =>
    pair.targets.map((t, second) => [
      ['targets', 'ceiling', 'usage'][index]!,
      t.name,
      whole(t.perSecond),
      ms(t.p50Ms),
      ms(t.p99Ms),
      ms(t.p999Ms),
      t.cpuUsPerRequest.toFixed(0),
      whole(t.requests),
      whole(non200(t.statuses)),
      second === 0 ? '' : `${times(pair.throughputRatio)} (${times(Math.min(...pair.groupRatios))}–${times(Math.max(...pair.groupRatios))})`,
    ]),
  )
  return [
    '',
    '## Warm key, paired at saturation',
    '',
    `Two targets at a time at saturation in turn, in slices of ${paired.sliceMs} ms ordered A B B A, ` +
      `${paired.slices} slices per pair, ${paired.connections} keep-alive connections each` +
      `${report.generator.name === 'wrk' ? ' (a wrk process per target, sending only within its own slices)' : ''}: the machine's drift reaches both alike. ` +
      `Throughput ratio: the median over the groups of four slices of the second's requests/s ÷ the first's; p99 ratio: over all the slices. ` +
      `First the ${paired.targets[0].name} and the ${paired.targets[1].name} (the targets), then the ${ceiling.targets[0].name} and the ${ceiling.targets[1].name} ` +
      `(the ceiling: the gateway's transport with no checks on it), then the ${usage.targets[0].name} and the ${usage.targets[1].name} ` +
      `(usage: what counting and the request log in its default mode cost).`,
    '',
    table(['pair', 'target', 'req/s', 'p50 ms', 'p99 ms', 'p99.9 ms', 'CPU µs/req', 'requests', 'non-200', 'throughput ratio (range over groups)'], rows),
  ]
}

function sideBySideSection(side: SideBySide): string[] {
  const out = [
    '',
    '## CPU per request, side by side',
    '',
    `${side.windows.length} windows of ${side.seconds} s: ${sideLoad(side)}, ` +
      `so they share every moment of the machine. CPU of each process over a window ÷ the requests it served; ` +
      `the ratio to the ${side.base} is taken window by window, then the median.`,
    '',
    table(
      ['target', ...side.windows.map((_, i) => `window ${i + 1} µs/req`), 'median µs/req', `÷ ${side.base}`],
      Object.entries(side.medians).map(([name, m]) => [
        name,
        ...side.windows.map((w) => (w.cpuUsPerRequest[name] ?? 0).toFixed(0)),
        m.cpuUsPerRequest.toFixed(0),
        `${m.ratio.toFixed(2)} ×`,
      ]),
    ),
  ]
  const bare = side.medians[BARE]
  const noChecks = side.medians[NO_CHECKS]
  const gateway = side.medians[GATEWAY]
  if (bare !== undefined && noChecks !== undefined && gateway !== undefined) {
    out.push(
      '',
      `The transport alone (${NO_CHECKS}) costs ${noChecks.ratio.toFixed(2)} × the ${BARE}'s CPU per request; the gateway's checks add ${(gateway.ratio - noChecks.ratio).toFixed(2)} × on top of it.`,
    )
  }
  const sideStatuses = side.windows.flatMap((w) =>
    Object.entries(w.statuses)
      .filter(([, counts]) => non200(counts) > 0)
      .map(([name, counts]) => `${name}: ${statuses(counts)}`),
  )
  if (sideStatuses.length > 0) out.push('', `Answers other than 200: ${sideStatuses.join('; ')}`)
  return out
}

function coldSection({ settings, cold }: Report): string[] {
  return [
    '',
    `## Cold paths: first use of a key, one request at a time, ${settings.coldKeys} keys each`,
    '',
    table(
      ['key held by', 'p50 ms', 'p99 ms', 'max ms', 'PG trips/key', 'Redis trips/key', 'key cache lookups (layer:result)', 'statuses'],
      [coldRow('Redis only (warmed by a second replica)', cold.redisOnly), coldRow('Postgres only', cold.postgresOnly)],
    ),
  ]
}

function millionSection(million: MillionKeys): string[] {
  return [
    '',
    `## ${whole(million.rows)} keys in Postgres`,
    '',
    `Inserted in ${million.insertSeconds.toFixed(1)} s (one INSERT … SELECT generate_series); api_keys ${mib(million.tableMiB)} MiB, index ${million.index} ${mib(million.indexMiB)} MiB.`,
    `${whole(million.lookups)} lookups of unknown keys (lookupKeyByHash, one connection, one at a time, after ${whole(WARM_UP_LOOKUPS)} untimed): p50 ${ms(million.latency.p50Ms)} ms, p99 ${ms(million.latency.p99Ms)} ms, p99.9 ${ms(million.latency.p999Ms)} ms, max ${ms(million.latency.maxMs)} ms.`,
    '',
    'Plan of the lookup statement (EXPLAIN ANALYZE, an unknown key):',
    '',
    '```',
    ...million.plan,
    '```',
  ]
}

/** The soak and the flood: what the gateway's memory did under each. */
function memorySection({ soak, flood }: Report): string[] {
  const soakRow = [
    `soak, ${soak.seconds} s (after ${soak.warmUpSeconds} s of the same load)`,
    `warm key, ${soak.connections} connections`,
    whole(soak.perSecond),
    ms(soak.p99Ms),
    statuses(soak.statuses),
    `${mib(soak.rssStartMiB)} → ${mib(soak.rssEndMiB)} (${mib(soak.rssMaxMiB)})`,
    '–',
  ]
  const floodRow = [
    `flood, ${flood.seconds.toFixed(0)} s`,
    `${whole(flood.keys)} distinct unknown keys, ${flood.connections} connections`,
    whole(flood.perSecond),
    ms(flood.p99Ms),
    statuses(flood.statuses),
    `${mib(flood.rssBeforeMiB)} → ${mib(flood.rssAfterMiB)} (${mib(flood.rssMaxMiB)})`,
    `${whole(flood.unknownEntriesBefore)} → ${whole(flood.unknownEntriesAfter)} (${whole(flood.unknownEntriesMax)})`,
  ]
  return [
    '',
    '## Gateway memory',
    '',
    table(['phase', 'load', 'req/s', 'p99 ms', 'statuses', 'RSS MiB start → end (max)', 'unknown-key entries start → end (max)'], [soakRow, floodRow]),
    '',
    `Flood store trips per request: Postgres ${per(flood.trips.postgresPerRequest)}, Redis ${per(flood.trips.redisPerRequest)}.`,
  ]
}

/** Writes the report under bench-results/ and answers its path relative to the project root. */
export function writeJson(report: Report): string {
  const dir = join(projectRoot, 'bench-results')
  mkdirSync(dir, { recursive: true })
  const name = `bench-results/${report.startedAt}.json`
  writeFileSync(join(projectRoot, name), `${JSON.stringify(report, null, 2)}\n`)
  return name
}
