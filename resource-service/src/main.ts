/** resource-service: configuration, migrations, then serve until SIGTERM. */
import { serveUntilTerminated, transportOf } from '@scoped/shared/backend-server'
import { runMain } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { migrateOrWait } from '@scoped/shared/migrate'
import { createNonceRedis } from '@scoped/shared/nonce-store'
import { buildResourceApp } from './app.js'
import { readResourceServiceConfig } from './config.js'

runMain('resource-service', async () => {
  const config = readResourceServiceConfig(process.env)
  const logger = createLogger('resource-service', config.logLevel)
  // Applies pending migrations when its role owns the schema; a least-privilege role waits for the migration job.
  await migrateOrWait(config.databaseUrl, { waitMs: 60_000, onWait: (pending) => logger.info({ pending }, 'waiting for the migration job') })
  const pool = createPool(config.databaseUrl, { applicationName: 'resource-service' })
  const nonceRedis = config.redisUrl === undefined ? undefined : createNonceRedis(config.redisUrl, config.redisKeyPrefix, 'resource-service')
  const app = await buildResourceApp({
    pool,
    logger,
    signingSecrets: config.signingSecrets,
    ...(config.tls === undefined ? {} : { https: config.tls }),
    ...(nonceRedis === undefined ? {} : { nonceRedis }),
  })
  await serveUntilTerminated(app, {
    name: 'resource-service',
    host: config.host,
    port: config.port,
    transport: transportOf(config.tls),
    ...(config.healthPort === undefined ? {} : { health: { port: config.healthPort, pool } }),
    release: async () => {
      nonceRedis?.client.disconnect()
      await pool.end()
    },
  })
})
