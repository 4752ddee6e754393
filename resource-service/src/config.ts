/** resource-service configuration, read and validated once at start. */
import type { Env, LogLevel } from '@scoped/shared/config'
import { readDatabaseUrl, readHost, readLogLevel, readPort, readRedisKeyPrefix, readRedisUrl } from '@scoped/shared/config'
import { readAudienceSecrets } from '@scoped/shared/secrets'
import { readBackendTls, readHealthPort } from '@scoped/shared/backend-server'
import type { BackendTls } from '@scoped/shared/backend-server'
import { RESOURCE_SERVICE_AUDIENCE } from '@scoped/shared/tenant-signature'

export interface ResourceServiceConfig {
  host: string
  port: number
  databaseUrl: string
  /** Where every replica of this service remembers the nonces it accepted; unset: this process alone (one replica only). */
  redisUrl: string | undefined
  redisKeyPrefix: string
  /**
   * This backend's own signing secrets: RESOURCE_SERVICE_SIGNING_SECRET (else derived from TENANT_SIGNING_SECRET),
   * then RESOURCE_SERVICE_SIGNING_SECRET_PREVIOUS (else derived from TENANT_SIGNING_SECRET_PREVIOUS) during a rotation.
   */
  signingSecrets: readonly Buffer[]
  /** RESOURCE_SERVICE_TLS_CERT_FILE / RESOURCE_SERVICE_TLS_KEY_FILE: listen with TLS; plain HTTP when unset. With RESOURCE_SERVICE_TLS_CLIENT_CA_FILE: mutual TLS. */
  tls: BackendTls | undefined
  /** RESOURCE_SERVICE_HEALTH_PORT: /healthz and /readyz on a plain-HTTP listener of their own (for probes under mutual TLS). */
  healthPort: number | undefined
  logLevel: LogLevel
}

export function readResourceServiceConfig(env: Env): Readonly<ResourceServiceConfig> {
  const port = readPort(env, 'RESOURCE_SERVICE_PORT', 4002)
  return Object.freeze({
    host: readHost(env, 'RESOURCE_SERVICE_HOST', '127.0.0.1'),
    port,
    databaseUrl: readDatabaseUrl(env).url,
    redisUrl: readRedisUrl(env),
    redisKeyPrefix: readRedisKeyPrefix(env),
    signingSecrets: readAudienceSecrets(env, RESOURCE_SERVICE_AUDIENCE),
    tls: readBackendTls(env, 'RESOURCE_SERVICE'),
    healthPort: readHealthPort(env, 'RESOURCE_SERVICE', port),
    logLevel: readLogLevel(env),
  })
}
