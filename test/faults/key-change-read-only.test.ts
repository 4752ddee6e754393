/**
 * A roll, a new expiry (a roll's grace period), a revoke and a delete with
 * Redis read-only (a replica of a master that is gone): the key's entry
 * stays in Redis, ctl (a process) still exits 0, and the change holds on
 * every gateway process at once, a while later, and on one started later.
 * key-changes.ts has the test.
 */
import { ENDING_CHANGES, readOnlyRedisTest } from './key-changes.js'

readOnlyRedisTest(ENDING_CHANGES)
