/**
 * The usage-at-scale step's targets (met or NOT MET) and its section of the
 * report; and the whole report when the step runs alone (BENCH_ONLY=usage-scale).
 */
import type { Machine } from './proc-stats.js'
import type { Check } from './summary.js'
import type { UsageScale } from './usage-scale.js'
import { USAGE_FLUSH_TARGET_MS, USAGE_MEMORY_TARGET_MIB, USAGE_QUERY_P95_TARGET_MS } from './usage-scale.js'

const whole = (value: number): string => Math.round(value).toLocaleString('en-US')
const mib = (bytes: number): string => (bytes / 2 ** 20).toFixed(1)

/** The counts' memory: the heap and the typed arrays (their cells' figures) that the counts hold. */
export function countsBytes(scale: UsageScale): number {
  return scale.replica.heapBytes + scale.replica.externalBytes
}

export function usageScaleChecks(scale: UsageScale): Check[] {
  const { replica } = scale
  const flushMs = Math.max(replica.firstFlushMs, replica.secondFlushMs)
  const spreadMs = Math.max(...replica.spreadFlushMs)
  return [
    {
      name: `usage: a replica's slowest flush, ${whole(replica.keys)} keys' requests spread over a minute's ${replica.spreadFlushMs.length} flushes`,
      value: `${whole(spreadMs)} ms`,
      target: `< ${whole(USAGE_FLUSH_TARGET_MS)} ms`,
      met: spreadMs < USAGE_FLUSH_TARGET_MS,
    },
    {
      name: `usage: a replica's flush of ${whole(replica.keys)} keys all in one batch (the slower of new rows and additions to them)`,
      value: `${whole(flushMs)} ms`,
      target: `< ${whole(USAGE_FLUSH_TARGET_MS)} ms`,
      met: flushMs < USAGE_FLUSH_TARGET_MS,
    },
    {
      name: `usage: a replica's memory for the counts of ${whole(replica.keys)} keys`,
      value: `${mib(countsBytes(scale))} MiB`,
      target: `< ${USAGE_MEMORY_TARGET_MIB} MiB`,
      met: countsBytes(scale) < USAGE_MEMORY_TARGET_MIB * 2 ** 20,
    },
    ...scale.queries.flatMap((query) => [
      {
        name: `usage report p95, agency of ${whole(scale.seed.agencyKeys)} keys, ${query.name}`,
        value: `${whole(query.p95Ms)} ms`,
        target: `< ${USAGE_QUERY_P95_TARGET_MS} ms`,
        met: query.p95Ms < USAGE_QUERY_P95_TARGET_MS,
      },
      {
        name: `usage report plan uses an index, ${query.name}`,
        value: query.usesIndex ? query.indexes.join(', ') : 'no',
        target: 'yes',
        met: query.usesIndex,
      },
    ]),
  ]
}

export function usageScaleSection(scale: UsageScale): string[] {
  const { replica, seed } = scale
  const rows = scale.queries.map((q) => [q.name, whole(q.rows), whole(q.points), q.p50Ms.toFixed(1), q.p95Ms.toFixed(1), q.maxMs.toFixed(1)])
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`
  return [
    '',
    '## Usage at scale',
    '',
    `A replica (a process of its own) counted ${whole(replica.requests)} requests of ${whole(replica.keys)} keys in one minute in ` +
      `${replica.countSeconds.toFixed(1)} s, into ${whole(replica.cells)} cells (key, route, outcome, status class); ` +
      `the counts held ${mib(replica.heapBytes)} MiB of heap and ${mib(replica.externalBytes)} MiB of typed arrays after a full GC ` +
      `(${whole(countsBytes(scale) / replica.keys)} bytes per key). One flush of them (the real writer, cut by agency into parts written on ${replica.writers} connections at once, ` +
      `each part one statement for the minute rows of each kind: per key, per sub-account, per agency): ` +
      `${whole(replica.firstFlushMs)} ms as new rows, ${whole(replica.secondFlushMs)} ms adding to the same rows (attempts: ${replica.flushAttempts.join(', ')}). ` +
      `The same requests spread over a minute's ${replica.spreadFlushMs.length} flushes (a twelfth of the keys each): ${replica.spreadFlushMs.map(whole).join(', ')} ms. ` +
      `The rollup of that hour (its minutes summed into hour rows of each kind, once, in the background): ${whole(replica.rollupMs)} ms.`,
    '',
    `Seeded in ${seed.seconds.toFixed(0)} s: ${seed.days} days of hourly rows for an agency with ${whole(seed.agencyKeys)} keys, every key every hour ` +
      `(${whole(seed.agencyRows)} rows, ${seed.rowsPerKeyPerDay.toFixed(1)} per key per day), beside ${whole(seed.otherRows)} rows of other agencies, and their day rows. ` +
      `usage_hours: ${mib(seed.hoursBytes)} MiB with its indexes, ${whole(seed.bytesPerHourRow)} bytes per row; usage_days: ${mib(seed.daysBytes)} MiB. ` +
      `The summaries without the key: usage_summary_hours ${whole(seed.summaryHourRows)} rows, ${mib(seed.summaryHoursBytes)} MiB; usage_summary_days ${mib(seed.summaryDaysBytes)} MiB; ` +
      `and without the sub-account either, the agencies' own (usage_agency_hours and _days).`,
    '',
    `The agency's report (usageReport, as GET /v1/agency/usage answers it), ${scale.runs} times each after 2 untimed:`,
    '',
    line(['report', 'rows read back', 'points', 'p50 ms', 'p95 ms', 'max ms']),
    line(['---', '---', '---', '---', '---', '---']),
    ...rows.map(line),
    ...scale.queries.flatMap((q) => ['', `Plan, ${q.name} (EXPLAIN):`, '', '```', ...q.plan, '```']),
  ]
}

/** The report of the step run alone: the machine, the targets, the section. */
export function usageScaleMarkdown(startedAt: string, machine: Machine, scale: UsageScale, jsonFile: string): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`
  const mark = (met: boolean | null): string => (met === null ? '' : met ? 'met' : '**NOT MET**')
  return [
    `# Gateway benchmark, usage at scale only (BENCH_ONLY=usage-scale), ${startedAt}`,
    '',
    `Machine: ${machine.cpuModel}, ${machine.cores} cores, ${whole(machine.memoryMiB)} MiB, Node ${machine.node}, Linux ${machine.kernel}; ` +
      `load average at start ${machine.loadAverage.join(' ')}.`,
    '',
    '## Targets',
    '',
    line(['check', 'value', 'target', '']),
    line(['---', '---', '---', '---']),
    ...usageScaleChecks(scale).map((c) => line([c.name, c.value, c.target, mark(c.met)])),
    ...usageScaleSection(scale),
    '',
    `Whole run: ${jsonFile}`,
    '',
  ].join('\n')
}
