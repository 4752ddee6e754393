/**
 * Usage counting's and the request log's settings, from the environment:
 * USAGE (`on` [default], `off`: neither counts nor the request log), REQUEST_LOG (`errors` [default], `all`, `off`), USAGE_FLUSH_INTERVAL [5s],
 * USAGE_MAX_CELLS [250000], USAGE_FLUSH_CONNECTIONS [2], USAGE_RETENTION_MINUTES [7d], USAGE_RETENTION_HOURS
 * [90d], USAGE_RETENTION_DAYS [400d], REQUEST_LOG_MAX_ROWS (per agency)
 * [100000], REQUEST_LOG_MAX_AGE [30d]. Durations are the contract's (`5s`, `90d`).
 */
import type { Env } from '@scoped/shared/config'
import { ConfigError } from '@scoped/shared/config'
import { parseDuration } from '@scoped/shared/durations'
import type { RequestLogMode, UsageOptions } from './usage-recorder.js'
import { DEFAULT_USAGE_OPTIONS } from './usage-recorder.js'

const MODES: readonly RequestLogMode[] = ['errors', 'all', 'off']

/** The replica's Postgres pool (app.ts), shared by key lookups, the flush's parts and the rollup. */
export const GATEWAY_POOL_SIZE = 10
/** The flush's parts and the rollup together hold at most half of the pool: key lookups keep the rest during a busy flush. */
export const MAX_FLUSH_CONNECTIONS = GATEWAY_POOL_SIZE / 2 - 1

function readDuration(env: Env, name: string, fallbackSeconds: number, minSeconds: number, maxSeconds: number): number {
  const text = env[name]?.trim()
  if (text === undefined || text === '') return fallbackSeconds
  const seconds = parseDuration(text)
  if (seconds === undefined || seconds < minSeconds || seconds > maxSeconds) {
    throw new ConfigError(name, `must be a duration (an integer and s, m, h or d) from ${minSeconds}s to ${maxSeconds}s, got ${JSON.stringify(text)}`)
  }
  return seconds
}

function readCount(env: Env, name: string, fallback: number, min: number, max: number): number {
  const text = env[name]?.trim()
  if (text === undefined || text === '') return fallback
  if (!/^[0-9]{1,9}$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new ConfigError(name, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(text)}`)
  }
  return Number(text)
}

function readMode(env: Env): RequestLogMode {
  const text = env['REQUEST_LOG']?.trim()
  if (text === undefined || text === '') return DEFAULT_USAGE_OPTIONS.requestLog.mode
  const mode = MODES.find((candidate) => candidate === text)
  if (mode === undefined) throw new ConfigError('REQUEST_LOG', `must be one of ${MODES.join(', ')}, got ${JSON.stringify(text)}`)
  return mode
}

const DAY = 86_400

/** USAGE=off turns the request log off too (one recorder writes both): asking for a log without counting is a contradiction. */
function readCounting(env: Env): boolean {
  const text = env['USAGE']?.trim()
  if (text === undefined || text === '' || text === 'on') return true
  if (text !== 'off') throw new ConfigError('USAGE', `must be on or off, got ${JSON.stringify(text)}`)
  const log = env['REQUEST_LOG']?.trim()
  if (log !== undefined && log !== '' && log !== 'off') {
    throw new ConfigError('REQUEST_LOG', `must be off (or unset) when USAGE=off: the request log is written with the counts, got ${JSON.stringify(log)}`)
  }
  return false
}

export function readUsageOptions(env: Env): UsageOptions {
  const defaults = DEFAULT_USAGE_OPTIONS
  const counting = readCounting(env)
  return Object.freeze({
    counting,
    // Usage must be visible within 10 s: a flush interval above 8 s could not promise it.
    intervalMs: readDuration(env, 'USAGE_FLUSH_INTERVAL', defaults.intervalMs / 1000, 1, 8) * 1000,
    maxCells: readCount(env, 'USAGE_MAX_CELLS', defaults.maxCells, 1_000, 100_000_000),
    writers: readCount(env, 'USAGE_FLUSH_CONNECTIONS', defaults.writers, 1, MAX_FLUSH_CONNECTIONS),
    writeDeadlineMs: defaults.writeDeadlineMs,
    retention: Object.freeze({
      minutes: readDuration(env, 'USAGE_RETENTION_MINUTES', defaults.retention.minutes, DAY, 90 * DAY),
      hours: readDuration(env, 'USAGE_RETENTION_HOURS', defaults.retention.hours, DAY, 800 * DAY),
      days: readDuration(env, 'USAGE_RETENTION_DAYS', defaults.retention.days, DAY, 3_650 * DAY),
    }),
    requestLog: Object.freeze({
      mode: counting ? readMode(env) : 'off',
      maxPending: defaults.requestLog.maxPending,
      capPerAgency: readCount(env, 'REQUEST_LOG_MAX_ROWS', defaults.requestLog.capPerAgency, 100, 100_000_000),
      maxAgeSeconds: readDuration(env, 'REQUEST_LOG_MAX_AGE', defaults.requestLog.maxAgeSeconds, DAY, 400 * DAY),
    }),
  })
}
