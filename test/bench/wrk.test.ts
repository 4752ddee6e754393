/**
 * wrk as the benchmark's load generator: the choice of generator, the figures
 * made from wrk's result (statuses, latency, the paired groups' ratios, the
 * side-by-side rate), the report's line on it, and, when wrk is installed,
 * scripts/bench/wrk.lua against real servers: each target sends only within
 * its own slices, every answer is counted in one, and a rate holds.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { chooseGenerator, findWrk, NODE_CLIENT } from '../../scripts/bench/load-generator.js'
import type { Paired, PairedTarget } from '../../scripts/bench/paired.js'
import { groupRatios, ownSlices, pairedFromWrk } from '../../scripts/bench/paired-slices.js'
import { generatorLine } from '../../scripts/bench/report.js'
import { SIDE_LOAD, sideRate } from '../../scripts/bench/side-by-side.js'
import { non200 } from '../../scripts/bench/summary.js'
import { loadResult } from '../../scripts/bench/wrk-load.js'
import type { WrkResult } from '../../scripts/bench/wrk-result.js'
import { parseWrkOutput, wrkLatency, wrkStatuses } from '../../scripts/bench/wrk-result.js'
import { monotonicMs, runWrk } from '../../scripts/bench/wrk.js'

const wrk = { binary: '/usr/bin/wrk', version: 'debian/4.1.0-3+b2' }

function result(slices: WrkResult['slices'], errors: Partial<WrkResult['errors']> = {}): WrkResult {
  const requests = slices.reduce((sum, slice) => sum + slice.answers, 0)
  return {
    requests,
    errors: { connect: 0, read: 0, write: 0, status: 0, timeout: 0, ...errors },
    latencyUs: { p50: 1500, p99: 4200, p999: 9000, max: 12000 },
    cpuUs: 3 * requests,
    slices,
  }
}

t.test('wrk when installed, unless BENCH_GENERATOR says node; wrk asked for and missing stops the run', async (t) => {
  t.equal(chooseGenerator(undefined, wrk).name, 'wrk')
  t.equal(chooseGenerator('', wrk).description, 'wrk debian/4.1.0-3+b2, one thread')
  t.same(chooseGenerator(undefined, null), { name: 'node', wrk: null, description: NODE_CLIENT })
  t.equal(chooseGenerator('node', wrk).wrk, null, 'node chosen although wrk is there')
  t.throws(() => chooseGenerator('wrk', null), /wrk is not installed/)
  t.throws(() => chooseGenerator('ab', wrk), /BENCH_GENERATOR must be wrk or node/)
})

t.test("a run's figures from wrk's result: statuses by what wrk counts, latency in ms, the slice's rate", async (t) => {
  const run = result([{ index: 0, answers: 10_000, ms: 5_012.5 }], { status: 30, read: 2, timeout: 1 })
  t.same(wrkStatuses(run), { '2xx-3xx': 9_970, '4xx-5xx': 30, error: 3 })
  t.same(wrkStatuses(result([{ index: 0, answers: 5, ms: 1 }])), { '2xx-3xx': 5 }, 'nothing else when nothing else happened')
  t.equal(non200(wrkStatuses(run)), 33, "wrk's served answers are not counted as failures; the rest are")
  t.equal(non200({ 200: 4, 503: 1, error: 1 }), 2, "and the Node client's statuses as before")
  t.same(wrkLatency(run), { p50Ms: 1.5, p99Ms: 4.2, p999Ms: 9, maxMs: 12 })
  const load = loadResult(run)
  t.equal(load.requests, 10_000)
  t.equal(load.seconds, 5.0125)
  t.equal(Math.round(load.perSecond), 1_995)
  t.equal(load.generatorCpuUsPerRequest, 3)
})

t.test("the paired slices: A B B A per group, and per group the second target's rate ÷ the first's", async (t) => {
  t.same(ownSlices(0, 8), [0, 3, 4, 7])
  t.same(ownSlices(1, 8), [1, 2, 5, 6])
  const first = [
    { index: 0, answers: 1_000, ms: 500 },
    { index: 3, answers: 1_200, ms: 600 },
    { index: 4, answers: 900, ms: 500 },
    { index: 7, answers: 900, ms: 500 },
  ]
  const second = [
    { index: 1, answers: 1_500, ms: 500 },
    { index: 2, answers: 1_500, ms: 500 },
    { index: 5, answers: 900, ms: 500 },
    { index: 6, answers: 900, ms: 500 },
  ]
  t.same(groupRatios(first, second), [1.5, 1], 'each rate the mean of its two slices (2 000/s for the first in group 1)')
  const paired = pairedFromWrk(result(first), result(second))
  t.same(paired.groupRatios, [1.5, 1])
  t.equal(paired.targets[0].requests, 4_000)
  t.equal(paired.targets[0].seconds, 2.1, 'its slices only, each to its last answer')
  t.equal(paired.targets[1].perSecond, 2_400)
})

t.test('the side-by-side rate: a quarter of the slower paired target, at least 100/s', async (t) => {
  const target = (perSecond: number): PairedTarget => ({
    name: 'x',
    requests: 1,
    seconds: 1,
    perSecond,
    statuses: {},
    p50Ms: 1,
    p99Ms: 1,
    p999Ms: 1,
    maxMs: 1,
    cpuUsPerRequest: 1,
  })
  const paired = (a: number, b: number): Paired => ({
    sliceMs: 500,
    slices: 4,
    connections: 50,
    targets: [target(a), target(b)],
    groupRatios: [1],
    throughputRatio: 1,
    p99Ratio: 1,
  })
  t.equal(SIDE_LOAD, 0.25)
  t.equal(sideRate(paired(22_000, 20_000)), 5_000)
  t.equal(sideRate(paired(100, 90)), 100)
})

t.test('the report names the generator, and what its figures mean', async (t) => {
  t.match(
    generatorLine({ name: 'wrk', description: 'wrk debian/4.1.0-3+b2, one thread' }),
    /^Load generator: wrk debian\/4\.1\.0-3\+b2, one thread, .*coordinated omission.*Node client/,
  )
  t.equal(generatorLine({ name: 'node', description: NODE_CLIENT }), `Load generator: ${NODE_CLIENT}.`)
})

t.test("wrk's result line is found in its output", async (t) => {
  const line = JSON.stringify(result([{ index: 0, answers: 3, ms: 1000 }]))
  t.same(parseWrkOutput(`Running 2s test @ http://x\n  1 threads\nWRK-RESULT ${line}\n`), JSON.parse(line))
  t.throws(() => parseWrkOutput('Running 2s test\n'), /wrk printed no result/)
})

const installed = findWrk()
t.test('wrk.lua against real servers', { skip: installed === null ? 'wrk is not installed (apt-get install -y wrk)' : false }, async (t) => {
  const server = async (): Promise<{ url: string; seen: () => number }> => {
    let seen = 0
    const made = createServer((_request, response) => {
      seen++
      response.end('ok')
    })
    await new Promise<void>((resolve) => made.listen(0, '127.0.0.1', resolve))
    t.teardown(() => new Promise<void>((resolve) => made.close(() => resolve())))
    t.teardown(() => made.closeAllConnections())
    return { url: `http://127.0.0.1:${(made.address() as AddressInfo).port}/`, seen: () => seen }
  }
  const [a, b] = [await server(), await server()]

  t.test('two targets in turn: each answer counted in one of its own slices', async (t) => {
    const start = monotonicMs() + 500
    const run = (target: { url: string }, own: number[]) =>
      runWrk(installed!, { url: target.url, headers: { 'x-bench': '1' }, connections: 4, start, sliceMs: 200, own })
    const [first, second] = await Promise.all([run(a, ownSlices(0, 8)), run(b, ownSlices(1, 8))])
    for (const [name, target, measured, own] of [
      ['first', a, first, ownSlices(0, 8)],
      ['second', b, second, ownSlices(1, 8)],
    ] as const) {
      t.same(
        measured.slices.map((slice) => slice.index),
        own,
        `${name}: its own slices`,
      )
      t.ok(
        measured.slices.every((slice) => slice.answers > 0 && slice.ms >= 200),
        `${name}: answers in each, each at least a slice long`,
      )
      const counted = measured.slices.reduce((sum, slice) => sum + slice.answers, 0)
      t.ok(
        counted <= target.seen() && target.seen() - counted <= 4,
        `${name}: every answer counted (${counted} of ${target.seen()}, at most one per connection still out)`,
      )
      t.same(wrkStatuses(measured), { '2xx-3xx': measured.requests })
    }
    t.equal(pairedFromWrk(first, second).groupRatios.length, 2)
  })

  t.test('a rate holds, after a warm-up that is not counted', async (t) => {
    const before = a.seen()
    const warm = monotonicMs() + 300
    const measured = await runWrk(installed!, { url: a.url, headers: {}, connections: 4, start: warm + 300, sliceMs: 1_000, own: [0], warm, rate: 200 })
    const answers = measured.slices[0]!.answers
    t.ok(answers > 0 && answers <= 201 + 4, `at most 200/s for the second (${answers})`)
    t.ok(a.seen() - before > answers, 'the warm-up was sent, and not counted')
  })
})
