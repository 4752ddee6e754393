/**
 * Signing the tenant headers of forwarded requests (signTenantHeaders from
 * shared). The MAC is a pure function of the secret, method, path with query,
 * tenant and timestamp (whole seconds), so headers signed for one key, method
 * and path are reused for the rest of that second instead of computing an
 * HMAC per request; the reuse table is emptied when the second changes and
 * bounded in size. A key id names exactly one tenant (scope and tenant of a
 * key never change), so it stands for the tenant in the table.
 */
import type { Tenant } from '@scoped/shared/tenant-signature'
import { signTenantHeaders } from '@scoped/shared/tenant-signature'

export type SignedHeaders = Readonly<Record<string, string>>

export class TenantSigner {
  private second = -1
  private readonly signed = new Map<string, SignedHeaders>()

  constructor(
    private readonly secret: string,
    private readonly maxEntries = 10_000,
  ) {}

  sign(method: string, pathWithQuery: string, tenant: Tenant, nowMs: number): SignedHeaders {
    const second = Math.floor(nowMs / 1000)
    if (second !== this.second) {
      this.signed.clear()
      this.second = second
    }
    const id = `${method} ${tenant.keyId} ${pathWithQuery}`
    let headers = this.signed.get(id)
    if (headers === undefined) {
      headers = Object.freeze(signTenantHeaders(this.secret, method, pathWithQuery, tenant, second))
      if (this.signed.size < this.maxEntries) this.signed.set(id, headers)
    }
    return headers
  }
}
