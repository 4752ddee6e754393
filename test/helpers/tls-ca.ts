/**
 * A throw-away certificate authority for the gateway → backend hop: a CA
 * (selfsigned), server certificates it signs for 127.0.0.1 and localhost,
 * and client certificates it signs, each written to PEM files.
 */
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { generate } from 'selfsigned'

export interface TestCa {
  cert: string
  key: string
  certFile: string
}

export interface IssuedCertificate {
  cert: string
  key: string
  certFile: string
  keyFile: string
}

function validity(): { notBeforeDate: Date; notAfterDate: Date } {
  const now = Date.now()
  return { notBeforeDate: new Date(now - 60_000), notAfterDate: new Date(now + 24 * 60 * 60 * 1000) }
}

/** A CA certificate and key, the certificate written to `<dir>/<name>.pem`. */
export async function makeCa(dir: string, name = 'ca', keyType: 'ec' | 'rsa' = 'ec'): Promise<TestCa> {
  const pems = await generate([{ name: 'commonName', value: `Test CA ${name}` }], {
    ...(keyType === 'rsa' ? { keyType: 'rsa' as const, keySize: 2048 } : { keyType: 'ec' as const, curve: 'P-256' as const }),
    algorithm: 'sha256',
    ...validity(),
    extensions: [
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true, critical: true },
    ],
  })
  const certFile = join(dir, `${name}.pem`)
  writeFileSync(certFile, pems.cert)
  return { cert: pems.cert, key: pems.private, certFile }
}

/** A certificate signed by `ca` (of the same key type: selfsigned signs with the new key's algorithm): for a server (127.0.0.1, localhost and `names`) or a client. */
export async function issueCertificate(
  ca: TestCa,
  dir: string,
  name: string,
  options: { usage: 'server' | 'client'; names?: string[]; keyType?: 'ec' | 'rsa' },
): Promise<IssuedCertificate> {
  const pems = await generate([{ name: 'commonName', value: name }], {
    ...(options.keyType === 'rsa' ? { keyType: 'rsa' as const, keySize: 2048 } : { keyType: 'ec' as const, curve: 'P-256' as const }),
    algorithm: 'sha256',
    ...validity(),
    ca: { key: ca.key, cert: ca.cert },
    extensions: [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      options.usage === 'server' ? { name: 'extKeyUsage', serverAuth: true } : { name: 'extKeyUsage', clientAuth: true },
      ...(options.usage === 'server'
        ? [
            {
              name: 'subjectAltName' as const,
              altNames: [
                { type: 2 as const, value: 'localhost' },
                { type: 7 as const, ip: '127.0.0.1' },
                ...(options.names ?? []).map((value) => ({ type: 2 as const, value })),
              ],
            },
          ]
        : []),
    ],
  })
  const certFile = join(dir, `${name}.crt`)
  const keyFile = join(dir, `${name}.key`)
  writeFileSync(certFile, pems.cert)
  writeFileSync(keyFile, pems.private, { mode: 0o600 })
  return { cert: pems.cert, key: pems.private, certFile, keyFile }
}
