/**
 * An allowlist change and a rate-limit change with Redis read-only (a
 * replica of a master that is gone): the key's entry stays in Redis, ctl (a
 * process) still exits 0, and the change holds on every gateway process at
 * once, a while later, and on one started later. key-changes.ts has the test.
 */
import { LIMIT_CHANGES, readOnlyRedisTest } from './key-changes.js'

readOnlyRedisTest(LIMIT_CHANGES)
