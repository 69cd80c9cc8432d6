// Ed25519 keys and NaCl `crypto_sign` combined messages (64-byte signature ‖ message), as
// go-vela/server's queue signs items (queue/redis/push.go with golang.org/x/crypto/nacl/sign).

import { type KeyObject, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';

/** An Ed25519 key pair with Vela's base64 encodings. */
export interface QueueKeys {
  privateKey: KeyObject;
  publicKey: KeyObject;
  /** Padded standard base64 of the 32-byte public key (what `/api/v1/queue/info` serves). */
  publicKeyBase64: string;
  /** Padded standard base64 of seed ‖ public key (64 bytes), the server's VELA_QUEUE_PRIVATE_KEY format. */
  privateKeyBase64: string;
}

/** Generates a fresh Ed25519 key pair. */
export function generateQueueKeys(): QueueKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const pub = Buffer.from(publicKey.export({ format: 'jwk' }).x ?? '', 'base64url');
  const seed = Buffer.from(privateKey.export({ format: 'jwk' }).d ?? '', 'base64url');
  return {
    privateKey,
    publicKey,
    publicKeyBase64: pub.toString('base64'),
    privateKeyBase64: Buffer.concat([seed, pub]).toString('base64'),
  };
}

/** Rebuilds a key pair from Vela's 64-byte base64 private key. */
export function queueKeysFromPrivate(privateKeyBase64: string): QueueKeys {
  const raw = Buffer.from(privateKeyBase64, 'base64');
  if (raw.length !== 64) throw new Error(`[vela-sim] queue private key must be 64 bytes, got ${raw.length}`);
  const seed = raw.subarray(0, 32);
  const pub = raw.subarray(32);
  const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d: seed.toString('base64url'), x: pub.toString('base64url') }, format: 'jwk' });
  const publicKey = createPublicKey(privateKey);
  return { privateKey, publicKey, publicKeyBase64: pub.toString('base64'), privateKeyBase64 };
}

/** NaCl `sign`: the 64-byte Ed25519 signature of `message` followed by `message`. */
export function signCombined(privateKey: KeyObject, message: Buffer): Buffer {
  return Buffer.concat([sign(null, message, privateKey), message]);
}

/** NaCl `sign.open`: the message when the signature verifies, otherwise undefined. */
export function openCombined(publicKey: KeyObject, signed: Buffer): Buffer | undefined {
  if (signed.length < 64) return undefined;
  const message = signed.subarray(64);
  return verify(null, message, publicKey, signed.subarray(0, 64)) ? message : undefined;
}
