/** resource-service: configuration, migrations, then serve until SIGTERM. */
import { serveUntilTerminated } from '@scoped/shared/backend-server'
import { runMain } from '@scoped/shared/config'
import { createPool } from '@scoped/shared/db'
import { createLogger } from '@scoped/shared/logger'
import { migrate } from '@scoped/shared/migrate'
import { buildResourceApp } from './app.js'
import { readResourceServiceConfig } from './config.js'

runMain('resource-service', async () => {
  const config = readResourceServiceConfig(process.env)
  const logger = createLogger('resource-service', config.logLevel)
  await migrate(config.databaseUrl)
  const pool = createPool(config.databaseUrl, { applicationName: 'resource-service' })
  const app = await buildResourceApp({ pool, logger, signingSecrets: config.signingSecrets })
  await serveUntilTerminated(app, { name: 'resource-service', host: config.host, port: config.port, release: () => pool.end() })
})
