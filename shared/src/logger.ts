/**
 * pino, configured once for every service. Credentials are redacted wherever
 * they could appear (request headers, error objects that echo a request), so a
 * key, a cookie or a signature never reaches a log line.
 */
import pino from 'pino'
import type { Logger, LoggerOptions } from 'pino'
import type { LogLevel } from './config.js'

export const redactedPaths = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'req.headers["x-tenant-signature"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'headers["x-api-key"]',
  'headers.cookie',
  'headers["x-tenant-signature"]',
  '*.authorization',
  '*["x-api-key"]',
  '*.password',
  '*.secret',
  '*.key',
  '*.plaintext',
]

export function loggerOptions(name: string, level: LogLevel): LoggerOptions {
  return {
    name,
    level,
    redact: { paths: redactedPaths, censor: '[redacted]' },
    base: { service: name },
    timestamp: pino.stdTimeFunctions.isoTime,
  }
}

export function createLogger(name: string, level: LogLevel, destination?: pino.DestinationStream): Logger {
  return destination ? pino(loggerOptions(name, level), destination) : pino(loggerOptions(name, level))
}

export type { Logger }
