/**
 * The key lifecycle (spec §3, and past it): create (with an optional expiry,
 * client-address allowlist and rate limit of its own), list, roll with a
 * grace period, change the allowlist or the rate limit, revoke, delete. The
 * CLI, the console and the API all go through here, so the rules, the limit,
 * the messages and the immediate effect are the same whichever of them is
 * used. Each step lives in a file of its own (key-creation, key-roll,
 * key-changes, key-ending); this class holds what they share.
 *
 * Every change commits first, whatever Redis is doing, with its audit event
 * in the same transaction. Revoke, delete, roll and a change then tell every
 * gateway replica and wait for each to confirm (see
 * @scoped/shared/key-invalidation). When that cannot be confirmed within its
 * deadline they throw InvalidationNotConfirmed (a 503 that says the change
 * was saved and what was not confirmed); the key is refused everywhere within
 * the stated bound all the same.
 */
import type { Pool, PoolClient } from '@scoped/shared/db'
import type { InvalidationReport, KeyInvalidator } from '@scoped/shared/key-invalidation'
import { InvalidationNotConfirmed } from '@scoped/shared/key-invalidation'
import type { ListQuery, Page } from '@scoped/shared/pagination'
import { listPage } from '@scoped/shared/pagination'
import type { ActorInput } from '../audit/actor.js'
import type { KeyUpdate } from './key-changes.js'
import { updateKey } from './key-changes.js'
import type { KeyContext, PendingInvalidation } from './key-context.js'
import type { NewKeyOptions } from './key-creation.js'
import { createKey } from './key-creation.js'
import type { LifecycleResult } from './key-ending.js'
import { deleteAllOfSubAccount, deleteKey, revokeKey } from './key-ending.js'
import type { KeyOwner } from './key-owner.js'
import { checkOwner, findKeyRow, ownerCondition, ownerId, requireOwner } from './key-owner.js'
import type { CreatedKey, KeyItem, KeyRow, KeySummary } from './key-records.js'
import { KEY_COLUMNS, keyItem, summary } from './key-records.js'
import type { RolledKey } from './key-roll.js'
import { rollKey } from './key-roll.js'
import type { PermissionCatalog } from './permission-catalog.js'
import { defaultPermissionCatalog } from './permission-catalog.js'

export type { KeyUpdate } from './key-changes.js'
export type { PendingInvalidation } from './key-context.js'
export { ACTIVE_KEY_LIMIT, KEY_NAME_MAX_LENGTH } from './key-creation.js'
export type { NewKeyOptions } from './key-creation.js'
export type { LifecycleResult } from './key-ending.js'
export { requireGraceSeconds } from './key-input.js'
export type { KeyFieldNames, RateLimitInput } from './key-input.js'
export type { KeyOwner } from './key-owner.js'
export { keyItem } from './key-records.js'
export type { CreatedKey, KeyItem, KeySummary } from './key-records.js'
export type { RolledKey } from './key-roll.js'
export { MAX_GRACE_SECONDS } from './key-status.js'

export class KeyService implements KeyContext {
  private readonly clock: () => number
  private readonly catalog: PermissionCatalog | undefined

  constructor(
    readonly pool: Pool,
    private readonly invalidator: KeyInvalidator,
    /** `permissions`: the routes file's names (readPermissionCatalog); deploy/routes.yaml's when absent. */
    options: { now?: () => number; permissions?: PermissionCatalog } = {},
  ) {
    this.clock = options.now ?? (() => Date.now())
    this.catalog = options.permissions
  }

  /** The permission names keys may be given (read on first use when none was passed). */
  get permissions(): PermissionCatalog {
    return this.catalog ?? defaultPermissionCatalog()
  }

  /** This service's clock (epoch ms): the one key statuses and expiries are judged by. */
  now(): number {
    return this.clock()
  }

  create(owner: KeyOwner, name: unknown, actor: ActorInput, options: NewKeyOptions = {}): Promise<CreatedKey> {
    return createKey(this, owner, name, actor, options)
  }

  /** Newest first; never a plaintext or a hash. */
  async list(owner: KeyOwner): Promise<KeySummary[]> {
    checkOwner(owner)
    await requireOwner(this.pool, owner)
    const { rows } = await this.pool.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE ${ownerCondition(owner, 1)} ORDER BY created_at DESC, id DESC`, [
      ownerId(owner),
    ])
    const now = this.clock()
    return rows.map((row) => summary(row, now))
  }

  /** One page of a sub-account's keys, in the API's list order (oldest first) and shape. */
  async listPage(subAccountId: string, query: ListQuery): Promise<Page<KeyItem>> {
    const now = this.clock()
    return listPage(this.pool, {
      table: 'api_keys',
      columns: KEY_COLUMNS,
      where: ['sub_account_id = $1'],
      values: [subAccountId],
      query,
      toItem: (row: KeyRow) => keyItem(summary(row, now)),
    })
  }

  /** One key, if it exists and (when `owner` is given) belongs to that owner. */
  async find(id: string, owner?: KeyOwner): Promise<KeySummary | undefined> {
    const row = await findKeyRow(this.pool, id, owner)
    return row && summary(row, this.clock())
  }

  revoke(id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
    return revokeKey(this, id, actor, owner)
  }

  delete(id: string, actor: ActorInput, owner?: KeyOwner): Promise<LifecycleResult> {
    return deleteKey(this, id, actor, owner)
  }

  /** See key-roll.ts: the new key is returned even when not every replica confirmed (`unconfirmed` says so). */
  roll(id: string, actor: ActorInput, owner?: KeyOwner, options: { graceSeconds?: unknown } = {}): Promise<RolledKey> {
    return rollKey(this, id, actor, owner, options.graceSeconds)
  }

  /** Changes a key's name, permissions, allowlist or own rate limit (key-changes.ts). */
  update(id: string, update: KeyUpdate): Promise<KeySummary> {
    return updateKey(this, id, update)
  }

  /** Every key of a sub-account, inside the caller's transaction; pass the result to `invalidate` once it has committed. */
  deleteAllOfSubAccount(client: PoolClient, subAccountId: string, actor: ActorInput): Promise<PendingInvalidation> {
    return deleteAllOfSubAccount(client, subAccountId, actor)
  }

  async invalidate(pending: PendingInvalidation, what: string): Promise<InvalidationReport> {
    const report = await this.invalidator.invalidate(pending.keys, pending.xid)
    if (!report.confirmed) throw new InvalidationNotConfirmed(report, what)
    return report
  }
}
