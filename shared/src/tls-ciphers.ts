/**
 * The TLS settings every listener and every internal client of the stack
 * shares: TLS 1.2 or newer, and on TLS 1.2 only forward-secret (ECDHE) AEAD
 * suites: no CBC, no static RSA key exchange, no finite-field DHE. TLS 1.3
 * suites (all AEAD and forward-secret) are Node's defaults and are not
 * affected by this list.
 */
export const MIN_TLS_VERSION = 'TLSv1.2'

export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256',
  'ECDHE-RSA-AES128-GCM-SHA256',
  'ECDHE-ECDSA-AES256-GCM-SHA384',
  'ECDHE-RSA-AES256-GCM-SHA384',
  'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-CHACHA20-POLY1305',
].join(':')
