/**
 * One JSON log line per request (Fastify's own request logging is off):
 * outcome, route, key id and tenant, client address, status and latency.
 * Never a header, a query string or a body; the path is cut to 256
 * characters and then anything shaped like a key in it, escaped or not, is
 * masked (log-mask.ts, linear in the input).
 */
import type { FastifyReply, FastifyRequest } from 'fastify'
import pino from 'pino'
import type { LogLevel } from '@scoped/shared/config'
import { maskForLog } from '@scoped/shared/log-mask'
import type { Tenant } from '@scoped/shared/tenant-signature'
import type { GatewayMetrics } from './metrics.js'
import type { RequestOutcome } from './outcomes.js'
import { outcomeOfStatus } from './outcomes.js'
import type { LimitKind } from '@scoped/shared/route-limits'
import type {} from './request-state.js'

let isoSecond = -1
let isoPrefix = ''
/** pino's isoTime, with the date formatted once per second instead of once per line. */
export function isoTime(): string {
  const now = Date.now()
  const second = Math.floor(now / 1000)
  if (second !== isoSecond) {
    isoSecond = second
    isoPrefix = new Date(second * 1000).toISOString().slice(0, 20)
  }
  const ms = now - second * 1000
  return `,"time":"${isoPrefix}${ms < 10 ? '00' : ms < 100 ? '0' : ''}${ms}Z"`
}

/**
 * A duration in milliseconds to three decimals ("1.235", "0.050"), written
 * from two whole numbers: V8 formats a whole number from a cache, while a
 * fraction goes through its shortest-decimal algorithm, on every line.
 */
export function millisText(ms: number): string {
  if (ms < 0) return `-${millisText(-ms)}`
  // Past about three centuries the whole part would be written with an exponent: JSON's own form then.
  if (!(ms < 1e12)) return JSON.stringify(Math.round(ms))
  const micros = Math.round(ms * 1000)
  const whole = Math.floor(micros / 1000)
  const fraction = micros - whole * 1000
  return `${whole}.${fraction < 10 ? '00' : fraction < 100 ? '0' : ''}${fraction}`
}

/**
 * A tenant's part of the line, made once per tenant object: the key layer
 * hands every request of a key held in memory the same object, so a key's
 * ids are escaped once, not on every line.
 */
const tenantParts = new WeakMap<Tenant, string>()
function tenantFields(tenant: Tenant): string {
  let part = tenantParts.get(tenant)
  if (part === undefined) {
    part = `,"keyId":${JSON.stringify(tenant.keyId)},"scope":"${tenant.scope}","agencyId":${JSON.stringify(tenant.agencyId)}`
    if (tenant.subAccountId !== null) part += `,"subAccountId":${JSON.stringify(tenant.subAccountId)}`
    tenantParts.set(tenant, part)
  }
  return part
}

/** Where request lines go: the gateway's log destination (log-destination.ts), or any sink in tests. */
export interface LineSink {
  write(line: string): unknown
}

/**
 * The line per request, on the gateway's log destination, in exactly the
 * shape pino gives every other line (level, time, service, name, the fields,
 * msg). It is built here field by field instead of through pino: a request
 * line holds only values the gateway made or checked (ids, an outcome, a route
 * prefix, a masked path, numbers), so pino's generic work per line (walking
 * the object, its redaction, its hooks) buys nothing here, and showed in the
 * benchmark's CPU profile of every request. Every string goes through
 * JSON.stringify, so no value can break the line. Written only when
 * LOG_LEVEL lets `info` through.
 */
export class RequestLogger {
  readonly enabled: boolean

  constructor(
    level: LogLevel,
    private readonly sink: LineSink,
  ) {
    const value = pino.levels.values[level] // undefined for 'silent'
    this.enabled = value !== undefined && value <= pino.levels.values['info']!
  }

  write(fields: RequestLine): void {
    let line = `{"level":30${isoTime()},"service":"gateway","name":"gateway","reqId":${JSON.stringify(fields.reqId)},"method":${JSON.stringify(fields.method)},"path":${JSON.stringify(fields.path)}`
    if (fields.route !== null) line += `,"route":${JSON.stringify(fields.route)}`
    line += `,"outcome":"${fields.outcome}"`
    if (fields.tenant !== null) line += tenantFields(fields.tenant)
    if (fields.client !== '') line += `,"client":${JSON.stringify(fields.client)}`
    if (fields.limit !== null) line += `,"limit":"${fields.limit}"`
    line += `,"status":${fields.status}`
    if (fields.ms !== null) line += `,"ms":${millisText(fields.ms)}`
    this.sink.write(`${line},"msg":"request"}\n`)
  }
}

export interface RequestLine {
  reqId: string
  method: string
  path: string
  route: string | null
  outcome: RequestOutcome
  tenant: Tenant | null
  client: string
  limit: LimitKind | null
  status: number
  /** How long the request took, in milliseconds (written rounded to the microsecond), or null when unknown. */
  ms: number | null
}

export function createRequestLogger(level: LogLevel, sink: LineSink): RequestLogger {
  return new RequestLogger(level, sink)
}

/** The path as it may be logged: no query, at most 256 characters, nothing shaped like a key. */
export function loggablePath(request: FastifyRequest): string {
  const canonical = request.gateway?.target?.path
  if (canonical !== undefined) return maskForLog(canonical)
  const raw = request.raw.url ?? ''
  const q = raw.indexOf('?')
  return maskForLog(q === -1 ? raw : raw.slice(0, q))
}

/** The line and the counts, from the gate's decision (request-state.ts) and the reply, once the answer has gone out. */
export function logRequest(log: RequestLogger, metrics: GatewayMetrics, request: FastifyRequest, reply: FastifyReply): void {
  const status = reply.statusCode
  // `?? null`: a request the router refused (frameworkErrors) may be a bare Request, without the gateway's decoration.
  const decision = request.gateway ?? null
  const outcome = decision?.outcome ?? outcomeOfStatus(status)
  const tenant = decision === null ? null : decision.tenant
  const route = decision === null ? null : decision.route
  metrics.countRequest(outcome, tenant === null ? null : tenant.scope, route)
  if (!log.enabled) return
  log.write({
    reqId: request.id,
    method: request.method,
    path: loggablePath(request),
    route: route === null ? null : route.prefix,
    outcome,
    tenant,
    client: decision === null ? '' : decision.client,
    limit: decision?.kind === 'key' ? decision.limit : null,
    status,
    ms: Number.isFinite(reply.elapsedTime) ? reply.elapsedTime : null,
  })
}
