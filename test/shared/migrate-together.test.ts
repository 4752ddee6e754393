/**
 * Migrators started together on Postgres (services and ctl apply pending
 * migrations at start): each runs in one transaction under an advisory lock,
 * so one applies them and the others wait, then find nothing pending.
 */
import t from 'tap'
import { knownMigrations, migrate } from '@scoped/shared/migrate'
import { emptyTestDatabase } from '../helpers/database.js'

t.test('migrators started together on an empty database apply every migration exactly once', async (t) => {
  const database = await emptyTestDatabase(t)
  const results = await Promise.all([migrate(database.url), migrate(database.url), migrate(database.url)])
  t.same(results.flat().sort(), knownMigrations(), 'each migration applied by exactly one of them')
  t.equal(results.filter((applied) => applied.length > 0).length, 1, 'one migrator applied them all, in one transaction')
  t.same(await migrate(database.url), [], 'nothing left to apply')
})
