"""What every GPU runtime shares: the launch loop, generated-source rendering, device columns between
stages, staging for streamed chunks, and the GPU column operations (scan, join, group table, rows).
"""
