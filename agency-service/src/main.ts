/** agency-service: configuration, migrations, then serve until SIGTERM. */
import { serveUntilTerminated } from '@scoped/shared/backend-server'
import { runMain } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { migrate } from '@scoped/shared/migrate'
import { buildAgencyApp } from './app.js'
import { readAgencyServiceConfig } from './config.js'
import { createKeyInvalidator } from './invalidator.js'
import { KeyService } from './keys/key-service.js'

runMain('agency-service', async () => {
  const config = readAgencyServiceConfig(process.env)
  const logger = createLogger('agency-service', config.logLevel)
  await migrate(config.databaseUrl)
  const pool = createPool(config.databaseUrl, { applicationName: 'agency-service' })
  const invalidator = await createKeyInvalidator(config.redisUrl, config.redisKeyPrefix, 'agency-service')
  const keys = new KeyService(pool, invalidator)
  const app = await buildAgencyApp({ pool, keys, logger, signingSecrets: config.signingSecrets })
  await serveUntilTerminated(app, {
    name: 'agency-service',
    host: config.host,
    port: config.port,
    release: async () => {
      await invalidator.close()
      await pool.end()
    },
  })
})
