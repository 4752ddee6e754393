import t from 'tap'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { createLogger } from '@scoped/shared/logger'
import { BatchingDestination } from '@scoped/gateway/log-destination'
import { parseRouteMap } from '@scoped/gateway/route-map'
import type { ScopedRoute } from '@scoped/gateway/route-map'
import type { Verification } from '@scoped/gateway/key-verifier'
import { KeyDecision, KeyRefusal, Refused } from '@scoped/gateway/request-state'
import { GatewayMetrics } from '@scoped/gateway/metrics'
import { createRequestLogger, isoTime, logRequest, millisText } from '@scoped/gateway/request-log'

t.test('isoTime formats exactly as Date.toISOString, across seconds and milliseconds', async (t) => {
  const realNow = Date.now
  t.teardown(() => (Date.now = realNow))
  for (const at of [0, 7, 42, 999, 1_000, 1_795_310_436_001, 1_795_310_436_010, 1_795_310_436_100, 1_795_310_436_999, 1_795_310_437_000, 4_102_444_799_999]) {
    Date.now = () => at
    t.equal(isoTime(), `,"time":"${new Date(at).toISOString()}"`, String(at))
  }
})

t.test('millisText writes a duration as the JSON number of its milliseconds rounded to the microsecond', async (t) => {
  const durations = [0, 0.0004, 0.0005, 0.001, 0.05, 0.999, 0.9995, 1, 1.23456, 9.9999, 10.01, 99.5, 1234.5678, 86_400_000.123, -0.25, -3.0004]
  for (let i = 0; i < 200; i++) durations.push(Math.random() * 10 ** (i % 7))
  for (const ms of durations) {
    const text = millisText(ms)
    t.match(text, /^-?(0|[1-9][0-9]*)\.[0-9]{3}$/, `${ms}: three decimals`)
    t.equal(JSON.parse(text), (Math.round(Math.abs(ms) * 1000) / 1000) * Math.sign(ms) || 0, `${ms} -> ${text}`)
  }
  for (const ms of [1e12, 5e21, -7e22]) t.equal(JSON.parse(millisText(ms)), Math.round(ms), `${ms}: a whole number, still JSON`)
  t.equal(millisText(Infinity), 'null', 'never a bare Infinity in the line')
})

t.test('BatchingDestination: lines leave in batches, in order; flush and flushSync send the rest', async (t) => {
  const written: string[] = []
  let synced = 0
  const destination = new BatchingDestination({ write: (text) => written.push(text), flushSync: () => synced++ }, 20, 60_000)
  t.teardown(() => destination.stop())
  destination.write('aaaaaaaaa\n')
  t.same(written, [], 'held below the batch size')
  destination.write('bbbbbbbbbbb\n')
  t.same(written, ['aaaaaaaaa\nbbbbbbbbbbb\n'], 'one write for the batch')
  destination.write('c\n')
  destination.flush()
  t.same(written.at(-1), 'c\n')
  destination.write('d\n')
  destination.flushSync()
  t.same(written.at(-1), 'd\n')
  t.equal(synced, 1)
  destination.flush()
  t.equal(written.length, 3, 'nothing to flush, nothing written')
})

t.test('the request line: the fields, no credentials, a key-shaped path masked', async (t) => {
  const lines: string[] = []
  const destination = { write: (line: string) => void lines.push(line) }
  const log = createRequestLogger('info', destination)
  const routes = parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'x')
  const metrics = new GatewayMetrics(routes)
  const forwarded = new KeyDecision(
    '',
    { path: '/v1/agents/sak_live_abcdefABCDEF012345', query: 'api_key=sak_live_x' },
    routes.routes[0] as ScopedRoute,
    'hash',
    { status: 'active', tenant: { scope: 'SUB-ACCOUNT', agencyId: 'a', subAccountId: 's', keyId: 'k' } },
    0,
  )
  forwarded.outcome = 'forwarded'
  const request = {
    id: 'r-1',
    method: 'GET',
    raw: { url: '/v1/agents/sak_live_abcdefABCDEF012345?api_key=sak_live_x' },
    gateway: forwarded,
    headers: { authorization: 'Bearer sak_live_secret' },
  } as unknown as FastifyRequest
  logRequest(log, metrics, request, { statusCode: 200, elapsedTime: 1.23456 } as FastifyReply)
  const line = JSON.parse(lines[0]!) as Record<string, unknown>
  t.match(line, {
    level: 30,
    service: 'gateway',
    msg: 'request',
    reqId: 'r-1',
    method: 'GET',
    route: '/v1/agents',
    outcome: 'forwarded',
    keyId: 'k',
    scope: 'SUB-ACCOUNT',
    agencyId: 'a',
    subAccountId: 's',
    status: 200,
    ms: 1.235,
  })
  t.equal(line['path'], '/v1/agents/sak_live_[redacted]')
  t.notOk(lines[0]!.includes('sak_live_abcdef') || lines[0]!.includes('api_key') || lines[0]!.includes('secret'))

  const missing = new Refused('', null)
  missing.outcome = 'missing'
  const refused = { ...request, gateway: missing, raw: { url: '/v1/x/..?q=1' } } as unknown as FastifyRequest
  logRequest(log, metrics, refused, { statusCode: 401, elapsedTime: 0.5 } as FastifyReply)
  const second = JSON.parse(lines[1]!) as Record<string, unknown>
  t.same(
    [second['outcome'], second['path'], 'keyId' in second, 'route' in second],
    ['missing', '/v1/x/..', false, false],
    'absent fields are left out; no query',
  )

  t.same(
    Object.keys(line),
    ['level', 'time', 'service', 'name', 'reqId', 'method', 'path', 'route', 'outcome', 'keyId', 'scope', 'agencyId', 'subAccountId', 'status', 'ms', 'msg'],
    "the shape of every other line (pino's), fields in order",
  )
  t.equal(new Date(line['time'] as string).toISOString(), line['time'])
  // The same fields through the gateway's pino logger: the same line, but for the time.
  const viaPino: string[] = []
  createLogger('gateway', 'info', { write: (text: string) => void viaPino.push(text) }).info(
    {
      reqId: line['reqId'],
      method: line['method'],
      path: line['path'],
      route: line['route'],
      outcome: line['outcome'],
      keyId: 'k',
      scope: 'SUB-ACCOUNT',
      agencyId: 'a',
      subAccountId: 's',
      status: 200,
      ms: 1.235,
    },
    'request',
  )
  t.same({ ...(JSON.parse(viaPino[0]!) as Record<string, unknown>), time: line['time'] }, line, 'what pino would have written')
  t.same(Object.keys(JSON.parse(viaPino[0]!) as object), Object.keys(line), 'in the same order')

  // Whatever the caller put in the path stays one valid JSON line.
  const hostile = { ...refused, raw: { url: '/v1/"},{"level":60,\u0000\n\u2028\\' } } as unknown as FastifyRequest
  logRequest(log, metrics, hostile, { statusCode: 400, elapsedTime: Number.NaN } as FastifyReply)
  t.equal(lines[2]!.indexOf('\n'), lines[2]!.length - 1, 'one line')
  const third = JSON.parse(lines[2]!) as Record<string, unknown>
  t.same([third['level'], third['path'], 'ms' in third], [30, '/v1/"},{"level":60,\u0000\n\u2028\\', false])

  // Below info, no request lines (the metrics still count them).
  for (const level of ['warn', 'silent'] as const) {
    const quiet: string[] = []
    logRequest(createRequestLogger(level, { write: (line: string) => void quiet.push(line) }), metrics, request, {
      statusCode: 200,
      elapsedTime: 1,
    } as FastifyReply)
    t.same(quiet, [], level)
  }
  t.match(await metrics.registry.getSingleMetricAsString('gateway_requests_total'), /outcome="forwarded",scope="SUB-ACCOUNT",route="\/v1\/agents"} 3/)

  // Every other line keeps the full shared redaction.
  const full: string[] = []
  createLogger('gateway', 'info', { write: (line: string) => void full.push(line) }).info({ err: { authorization: 'Bearer sak_live_secret' } }, 'x')
  t.notOk(full[0]!.includes('sak_live_secret'))
})

t.test("a revoked key's refusal line names the key and its owner; a deleted key's names no one", async (t) => {
  const lines: string[] = []
  const log = createRequestLogger('info', { write: (line: string) => void lines.push(line) })
  const routes = parseRouteMap('routes:\n  - { prefix: /v1/agents, scope: SUB-ACCOUNT, upstream: "http://127.0.0.1:1" }\n', 'x')
  const metrics = new GatewayMetrics(routes)
  const owner = { scope: 'SUB-ACCOUNT', agencyId: 'a', subAccountId: 's', keyId: 'k' } as const
  const line = (state: Verification, outcome: 'revoked' | 'deleted'): Record<string, unknown> => {
    const decision = new KeyRefusal('192.0.2.7', { path: '/v1/agents/1', query: '' }, routes.routes[0] as ScopedRoute, 'hash', state, outcome)
    decision.outcome = outcome
    const request = { id: `r-${lines.length}`, method: 'GET', raw: { url: '/v1/agents/1' }, gateway: decision } as unknown as FastifyRequest
    logRequest(log, metrics, request, { statusCode: 401, elapsedTime: 0.2 } as FastifyReply)
    return JSON.parse(lines.at(-1)!) as Record<string, unknown>
  }
  t.match(line({ status: 'revoked', tenant: owner }, 'revoked'), {
    outcome: 'revoked',
    keyId: 'k',
    scope: 'SUB-ACCOUNT',
    agencyId: 'a',
    subAccountId: 's',
    status: 401,
  })
  const unowned = line({ status: 'revoked' }, 'revoked')
  t.same([unowned['outcome'], 'keyId' in unowned], ['revoked', false], 'revoked, its owner not known here: the refusal, no key')
  const deleted = line({ status: 'deleted' }, 'deleted')
  t.same([deleted['outcome'], 'keyId' in deleted, 'agencyId' in deleted], ['deleted', false, false], 'a deleted key: no one')
  const counted = await metrics.registry.getSingleMetricAsString('gateway_requests_total')
  t.match(counted, /outcome="revoked",scope="SUB-ACCOUNT",route="\/v1\/agents"} 1/, 'the metric: by scope, never by key')
  t.notMatch(counted, /keyId|"k"/)
})
