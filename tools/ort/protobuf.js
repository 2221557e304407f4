// Protocol Buffers wire-format pieces shared by the scripts that write small ONNX messages.
'use strict';

// An unsigned integer as a base-128 varint.
function encodeVarint(n) {
  const out = [];
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    out.push(b);
  } while (n > 0);
  return Buffer.from(out);
}

module.exports = { encodeVarint };
