"""The PostgreSQL team store (psycopg 3): the shared backend."""
