"""What this process runs the JVM with: ``$GRIDSTREAM_HOME`` (``home``), the pinned
Maven artifact sets and their classpaths, fetched once (``artifacts``), and Java
(``java``). Spark's session and the local services (``gridstream.stack``) both take
their jars from here; nothing here starts a service.
"""

from gridstream.runtime.artifacts import ARTIFACT_SETS, classpath, ensure_artifacts
from gridstream.runtime.home import gridstream_home
from gridstream.runtime.java import find_java

__all__ = ["ARTIFACT_SETS", "classpath", "ensure_artifacts", "find_java", "gridstream_home"]
