"""Helpers shared by the tests: plain functions and classes, no fixtures (those live in
``tests/conftest.py``). One module per job:

- ``commands``: the repository root, ``git``, the CLI as a real process, a refusal's checks;
- ``cassettes``: small valid cassettes, written where ``casstore add`` finds them;
- ``fakes``: obviously fake credentials and times, built at run time;
- ``s3``: the loopback S3 server (moto) and its fake AWS environment;
- ``gitrepo``: commits and pins in real repositories, aged stores;
- ``figures``: the reliability figures a test records (printed at the end of the run);
- ``loopback``: the one lifecycle of a server on 127.0.0.1;
- ``llm_server``, ``bedrock_server``: fake providers; ``faultproxy``: a fault-injecting proxy;
- ``replay``: record a run, then replay it offline (the client adapter tests);
- ``calls``: one chat call to the fake provider through the OpenAI SDK or requests.
"""
